#!/usr/bin/env bash
# Here: the carry for `python -m triton_kit.benchmarks.gpu.aoti` on the lent GPU machine.
# AOTI_CARRY (default .whl-aoti, git-ignored) gets hard links to what an AOTI run uses of CARRY
# (default .whl, made by scripts/gpu/prepare.sh): the trimmed server, clients, perf_analyzer,
# Triton's backend sources and Debian packages. Left out: the numpy 1.26 wheel (18 MB, for the
# python stubs: an AOTI run serves no python model, so bench.sh makes no stub venv) and
# tokenizer.json. Why: a call carries at most 64 MiB with the checkout, and the checkout and
# CARRY together passed it (calls 22-25 of issue 30 ran on this carry).
# Then on the device: TRITON_KIT_GPU_NATIVE='' TRITON_KIT_AOTI_CXX=/usr/bin/g++ \
#     bash scripts/gpu/bench.sh AOTI_CARRY "$OUT" triton_kit.benchmarks.gpu.aoti --out "$OUT" ...
set -euo pipefail
aoti=${1:-.whl-aoti}
carry=${2:-.whl}
rm -rf "$aoti" && mkdir -p "$aoti"
for item in clients.tar.xz cuda-shm.tar.xz perf_analyzer.xz trimmed-server.tar.xz debs triton-src; do
    if [[ -e "$carry/$item" ]]; then cp -al "$carry/$item" "$aoti/"; fi
done
# The copy on the GPU machine has no .git: its reports take the commit from here.
git rev-parse --short HEAD > "$aoti/commit"
du -sh "$aoti"
