#!/usr/bin/env bash
# perf_analyzer into the venv (VENV/bin/perf_analyzer), for the benchmarks that compare the
# kit's Python client with Triton's own C++ load generator (triton_kit/benchmarks/harness/perf_analyzer.py).
# Why this way: current tritonclient wheels no longer ship it and the `perf-analyzer` name on
# PyPI is a placeholder; the tritonclient 2.51 wheel (the embedded server's release) carries
# the binary. It needs libb64 and libcudart 12 (only loaded; no GPU is used), which the
# nvidia-pytriton wheel already bundles under hashed names: symlinks give them theirs.
set -euo pipefail
venv=${1:-.venv}
venv=$(cd "$venv" && pwd -P)  # the real path: a symlinked venv outlives its link
[[ -x "$venv/bin/perf_analyzer" ]] && exit 0
home="$venv/libexec/perf_analyzer"
libs=$(ls -d "$venv"/lib/python3*/site-packages/nvidia_pytriton.libs)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" -m pip download -q --no-deps --only-binary=:all: 'tritonclient==2.51.*' -d "$work"
mkdir -p "$home/libs"
unzip -q -o -j "$work"/tritonclient-*.whl '*/data/bin/perf_analyzer' -d "$home"
ln -sf "$libs"/libb64-*.so.0d "$home/libs/libb64.so.0d"
ln -sf "$libs"/libcudart-*.so.12* "$home/libs/libcudart.so.12"
printf '#!/bin/sh\nLD_LIBRARY_PATH="%s:%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
    "$home/libs" "$libs" "$home/perf_analyzer" > "$venv/bin/perf_analyzer"
chmod +x "$venv/bin/perf_analyzer" "$home/perf_analyzer"
"$venv/bin/perf_analyzer" --version
