#!/usr/bin/env bash
# On the lent GPU machine, after scripts/gpu/bench.sh's setup: every goal of issue 30 measured in
# one run, each ratio within it (benchmarks/results/gpu.md is this run's report, rendered here by
# `python -m triton_kit.benchmarks.gpu.goals_report`). The carry comes from
# scripts/gpu/prepare_goals.sh; the run outlasts one device call, so scripts/gpu/background.sh
# starts it in a session of its own and collects what it has written, call after call:
#   bash scripts/gpu/background.sh start .whl-goals "$OUT"   (then: bash scripts/gpu/background.sh wait "$OUT")
# Steps, the principal goals first (a run cut short keeps them), each a folder of OUT:
#   resnet50    the AOTInductor package at c256 (4 instances, CUDA shm) and at c1 against the
#               same package in process, each without and with CUDA graphs
#   bert-base   the same at c64 (4 instances, system shm)
#   bert-large  the same (2 instances)
#   pipelines   the resnet50 JPEG ensemble and the bert text model against their pipelines in
#               process (the kit's own TorchScript builds)
#   launcher    the kit's launcher against a bare tritonserver on the same repository
#   pytest      tests/integration/server/test_aoti_backend.py on this machine's build of the
#               backend (its gpu-marked test runs here only)
# Each step has a time limit (GOALS_STEP_S, default 420 s) and its own log (OUT/<step>/run.log).
set -uo pipefail
carry=$1; out=$2; shift 2
limit=${GOALS_STEP_S:-420}
cpus=(--server-cpus 0-11 --client-cpus 12-15)
step() {
    local name=$1; shift
    mkdir -p "$out/$name"
    echo "[goals $(date -u +%H:%M:%S)] $name: python3 -m $* --out $out/$name"
    timeout "$limit" python3 -m "$@" --out "$out/$name" > "$out/$name/run.log" 2>&1
    echo "[goals $(date -u +%H:%M:%S)] $name: exit $?"
}
# A fresh server's first load pays each instance's first call at every batch size (call 26), so
# each batched load is measured three times in a row. The gather kernel lost on ResNet-50 (call
# 32: 0.76-0.78x against 0.83-0.90x) and was within the spread on BERT-base.
# CUDA graphs (the kit's pytorch_aoti build, captured at load by warm-up requests) served BERT-base
# 1.31x and a lone request 2.7x faster (call 37), ResNet-50's lone request 2x (call 38): every
# package row is measured without and with them, against the package in process either way.
step resnet50 triton_kit.benchmarks.gpu.aoti --seconds 2 --instances 4 --shared-memory cuda \
    --repeats 3 --no-baseline --cuda-graphs off,on "${cpus[@]}"
# BERT's inputs (2 KB a request) through system shared memory served BERT-base 0.85-0.90x against
# 0.70-0.75x through CUDA shared memory in one run (call 34), BERT-large 0.89-0.92x against
# 0.87-0.89x (call 35): system shared memory only.
step bert-base triton_kit.benchmarks.gpu.aoti --family bert-base --seconds 2 --instances 4 \
    --shared-memory system --repeats 3 --cuda-graphs off,on "${cpus[@]}"
step bert-large triton_kit.benchmarks.gpu.aoti --family bert-large --seconds 2 --instances 2 \
    --shared-memory system --repeats 3 --cuda-graphs off,on "${cpus[@]}"
step pipelines triton_kit.benchmarks.gpu.pipelines --seconds 2 --tokenizer "$carry/tokenizer.json" \
    --budget-s 240 --models resnet50,bert
step launcher triton_kit.benchmarks.gpu.serving --seconds 2 --steps launcher \
    --variants native_i4_d2000p
mkdir -p "$out/pytest"
echo "[goals $(date -u +%H:%M:%S)] pytest tests/integration/server/test_aoti_backend.py"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/integration/server/test_aoti_backend.py \
    > "$out/pytest/aoti-backend.log" 2>&1
echo "[goals $(date -u +%H:%M:%S)] pytest: exit $?"
echo "[goals $(date -u +%H:%M:%S)] done"
touch "$out/done"
