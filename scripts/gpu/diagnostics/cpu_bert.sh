#!/usr/bin/env bash
# On the lent GPU machine, but CPU only: triton_kit.benchmarks.bert (MiniLM shape, RANDOM weights, ONNX
# Runtime on the CPU) with the server, its stubs and the client pinned to two quiet cores
# (taskset), once as built and once with ONNX Runtime's `session.force_spinning_stop`.
# Why: on the shared 2-core CPU machine, other jobs' load moved the concurrency-1 figures by
# more than the effects measured (benchmarks/results/bert.md). Speed does not depend on the weights.
# Usage: [VARIANTS="built"] [CORES=2,3] scripts/gpu/diagnostics/cpu_bert.sh CARRY_DIR OUT_DIR [SECONDS]
set -euo pipefail
carry=$1; out=$2; seconds=${3:-3}
python3 -c 'import onnx, onnxruntime, psutil, tokenizers; print("onnx", onnx.__version__, "ort", onnxruntime.__version__)' | tee "$out/imports.txt"
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz' > "$out/cpu.txt" || true
mkdir -p /tmp/tok && cp "$carry/tokenizer.json" /tmp/tok/
cores=${CORES:-2,3}
bash scripts/gpu/bench.sh "$carry" "$out" triton_kit.build_engines bert --shape minilm-l6 --checkpoint /tmp/tok \
    --max-length 256 --threads 2 --instances 1 --output-repository /tmp/repo --work-dir /tmp/bw > "$out/build.log" 2>&1
for variant in ${VARIANTS:-built force_spinning_stop}; do
    if [[ $variant == force_spinning_stop ]]; then
        printf 'parameters {\n  key: "session.force_spinning_stop"\n  value {\n    string_value: "1"\n  }\n}\n' >> /tmp/repo/bert/config.pbtxt
    fi
    taskset -c "$cores" bash scripts/gpu/bench.sh "$carry" "$out" triton_kit.benchmarks.bert --skip-base \
        --model-repository /tmp/repo --work-dir /tmp/bb --seconds "$seconds" \
        --output "$out/bert-2cores-$variant.md" > "$out/bert-$variant.log" 2>&1 || true
done
