#!/usr/bin/env bash
# On the lent GPU machine: install the carried client wheels and the trimmed
# nvidia-pytriton server (binary, libs, python backend, 3.12 stub, in the wheel's own
# layout) into /tmp/site, then run benchmarks/gpu.py.
# Usage: scripts/gpu/bench.sh CARRY_DIR OUT_DIR [benchmarks.gpu args...]
set -euo pipefail
carry=$1; out=$2; shift 2
mkdir -p /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$carry"/*.whl
tar -C /tmp/site -xJf "$carry/trimmed-server.tar.xz"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
python3 -m benchmarks.gpu --out "$out" "$@" 2>&1 | tee "$out/bench.log"
