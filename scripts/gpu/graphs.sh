#!/usr/bin/env bash
# On the lent GPU machine, after scripts/gpu/bench.sh's setup: CUDA graphs in the kit's
# pytorch_aoti build (issue 30; scripts/gpu/pytorch_aoti/cuda_graphs.hh), in one call:
#   TRITON_KIT_GPU_NATIVE= TRITON_KIT_AOTI_CXX=/usr/bin/g++ \
#       bash scripts/gpu/bench.sh .whl-goals OUT --script scripts/gpu/graphs.sh
# Steps, each a folder of OUT, each cut at the run's deadline (GRAPHS_BUDGET_S after bench.sh
# started, default 560 s, inside one device call's 600):
#   bert-base  the package at c64 (4 instances, system shm) and at c1, without and with graphs,
#              against the same package in process, plain and replayed from a graph
#   pytest     test_aoti_backend.py's GPU tests (graphs serve every batch exactly)
#   resnet50   the same at c256 (CUDA shm)
# GRAPHS_STEPS picks steps (default: all three, in that order); GRAPHS_REPEATS (default 2) is
# each batched load's count.
set -uo pipefail
carry=$1; out=$2; shift 2
deadline=$(( ${TRITON_KIT_GPU_STARTED:-$(date +%s)} + ${GRAPHS_BUDGET_S:-560} ))
cpus=(--server-cpus 0-11 --client-cpus 12-15)
steps=" ${GRAPHS_STEPS:-bert-base pytest resnet50} "
repeats=${GRAPHS_REPEATS:-2}
step() {
    local name=$1 left=$(( deadline - $(date +%s) )); shift
    if [[ "$steps" != *" $name "* ]]; then return; fi
    if (( left < 30 )); then echo "[graphs] $name: skipped, ${left} s left"; return; fi
    mkdir -p "$out/$name"
    echo "[graphs $(date -u +%H:%M:%S)] $name: $* (at most ${left} s)"
    timeout "$left" "$@" > "$out/$name/run.log" 2>&1
    echo "[graphs $(date -u +%H:%M:%S)] $name: exit $?"
}
step bert-base python3 -m triton_kit.benchmarks.gpu.aoti --family bert-base --seconds 2 \
    --instances 4 --shared-memory system --repeats "$repeats" --cuda-graphs off,on "${cpus[@]}" \
    --out "$out/bert-base"
step pytest python3 -m pytest -q -p no:cacheprovider -k gpu tests/integration/server/test_aoti_backend.py
step resnet50 python3 -m triton_kit.benchmarks.gpu.aoti --seconds 2 --instances 4 \
    --shared-memory cuda --repeats "$repeats" --no-baseline --cuda-graphs off,on "${cpus[@]}" \
    --out "$out/resnet50"
touch "$out/done"
