#!/usr/bin/env bash
# On the lent GPU machine: the carried client wheels and trimmed nvidia-pytriton server go
# into /tmp/site for the launcher and clients (the machine's numpy 2.5, torch, transformers),
# and the python stubs get their own venv with numpy 1.26 ahead of the machine's packages.
#
# Why: Triton 2.51's python stub ignores PYTHONPATH and takes sys.path from the venv of the
# `python3` first on PATH (scripts/gpu/probe_io.py), and its numpy interop needs numpy<2
# (nvidia-pytriton pins it): under numpy 2.5 as_numpy() read every input as its first
# element repeated and pb_utils.Tensor outputs came back empty.
# Usage: scripts/gpu/bench.sh CARRY_DIR OUT_DIR [python -m args...]
set -euo pipefail
carry=$1; out=$2; shift 2
install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$@"; }
clients=$(ls "$carry"/*.whl | grep -v /numpy-)
install /tmp/site $clients
tar -C /tmp/site -xJf "$carry/trimmed-server.tar.xz"
venv=/tmp/stub-venv
python3 -m venv --without-pip "$venv"
stub_site=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
install "$stub_site" "$carry"/numpy-*.whl
python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$stub_site/zz-machine.pth"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_KIT_STUB_PYTHON=$venv/bin/python3
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
"$venv/bin/python3" -c 'import numpy, torch; print("stub numpy", numpy.__version__, "torch", torch.__version__)' | tee "$out/versions.txt"
if [[ $# -eq 0 ]]; then set -- benchmarks.gpu --out "$out"; fi
python3 -m "$@" 2>&1 | tee "$out/run.log"
