#!/usr/bin/env bash
# On the lent GPU machine, after scripts/gpu/bench.sh's setup (issue 30: `loadtest tune` on the
# H100 for the ResNet-50 and BERT engines). The carry comes from scripts/gpu/prepare_tune.sh:
#   TRITON_KIT_GPU_NATIVE=pytorch TRITON_KIT_GPU_AOTI=0 \
#       bash scripts/gpu/bench.sh .whl-tune "$OUT" --script scripts/gpu/tune.sh
# 1. Model Analyzer from the carry's installed tree (the machine has no package index), checked
#    before anything is built.
# 2. The kit's engines built the way `python -m triton_kit.benchmarks.gpu.pipelines` builds them
#    (benchmarks/gpu/pipelines/build.py: TorchScript served by Triton's pytorch backend, FP16
#    on a GPU): resnet50 and bert (all-MiniLM-L6-v2's shape, random weights, the carry's
#    tokenizer), side by side.
# 3. `python -m triton_kit.loadtest tune`, one model at a time so that a run cut short keeps
#    the models already done: resnet50_model, then bert_model (its token ids sent as ones of
#    TUNE_BERT_LENGTH). Each tune gets a `timeout` from what is left of TUNE_LIMIT_S (counted
#    from bench.sh's start), keeping TUNE_PACK_S to pack the results.
# OUT gets tune-<model>.md (tune's summary.md) per model done and tune.tar.gz (every report,
# Model Analyzer's logs, CSVs and configs, the build logs), beside bench.sh's files.
# Knobs (environment): TUNE_SLO_RESNET_MS, TUNE_SLO_BERT_MS, TUNE_RESNET_ARGS, TUNE_BERT_ARGS
# (tune's search flags), TUNE_BERT_LENGTH, TUNE_LIMIT_S, TUNE_PYTHON (default python3) and
# TUNE_MA_PYTHON (Model Analyzer's; default TUNE_PYTHON).
set -uo pipefail
carry=$1; out=$2; shift 2
py=${TUNE_PYTHON:-python3}
ma_py=${TUNE_MA_PYTHON:-$py}
work=${TUNE_WORK:-/tmp/tune}
limit=${TUNE_LIMIT_S:-575}
pack=${TUNE_PACK_S:-25}
started=${TRITON_KIT_GPU_STARTED:-$(date +%s)}
left() { echo $((limit - ($(date +%s) - started))); }
stamp() { echo "[tune.sh $(date -u +%H:%M:%S), $(left) s left] $*"; }
rm -rf "$work" && mkdir -p "$work/logs"

finish() {
    stamp "packing results into $out"
    for summary in "$work"/runs/*/summary.md; do
        [[ -f "$summary" ]] && cp "$summary" "$out/tune-$(basename "$(dirname "$summary")").md"
    done
    # Variants' copies of the engines stay out (they are the built model files, hundreds of MB).
    tar -C "$work" --exclude='*.pt' --exclude='*.onnx' --exclude='*.plan' --exclude='backends' \
        --exclude='repo' --exclude='build-work' --exclude='model-analyzer-site' -czf "$out/tune.tar.gz" . 2>/dev/null
    ls -la "$out"
}
trap finish EXIT

# 1. Model Analyzer: its tree first on its PYTHONPATH (protobuf 6), then the kit's (clients).
ma_site=$work/model-analyzer-site
mkdir -p "$ma_site"
tar -C "$ma_site" -xJf "$carry/model-analyzer.tar.xz" || { stamp "no $carry/model-analyzer.tar.xz"; exit 1; }
ma=$work/model-analyzer
printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s -c %s "$@"\n' "$ma_site" "$ma_py" \
    "'import sys; from model_analyzer.entrypoint import main; sys.argv[0] = \"model-analyzer\"; sys.exit(main())'" > "$ma"
chmod +x "$ma"
NUMBA_DISABLE_CUDA=1 "$ma" --version > "$work/logs/model-analyzer-version.log" 2>&1
PYTHONPATH=$ma_site${PYTHONPATH:+:$PYTHONPATH} "$ma_py" -c 'import sys, numpy, numba, google.protobuf as pb, matplotlib, tritonclient, gevent
print(sys.version.split()[0], "numpy", numpy.__version__, "numba", numba.__version__, "protobuf", pb.__version__,
      "matplotlib", matplotlib.__version__, "gevent", gevent.__version__, "tritonclient", tritonclient.__file__)' \
    > "$work/logs/model-analyzer-imports.log" 2>&1
if ! NUMBA_DISABLE_CUDA=1 "$ma" profile --help > "$work/logs/model-analyzer-help.log" 2>&1; then
    stamp "Model Analyzer does not start:"; tail -20 "$work/logs/model-analyzer-help.log"; exit 1
fi
stamp "Model Analyzer $(tail -1 "$work/logs/model-analyzer-version.log") starts on Python $(tail -1 "$work/logs/model-analyzer-imports.log")"

# 2. The engines, as benchmarks.gpu.pipelines builds them (FP16 where a GPU is visible).
repo=$work/repo
precision=fp32
if nvidia-smi -L 2>/dev/null | grep -q GPU; then precision=fp16; fi
bert_length=${TUNE_BERT_LENGTH:-64}
build() {  # family, then build_engines' flags
    "$py" -m triton_kit.build_engines "$1" --engine torch --output-repository "$repo" \
        --work-dir "$work/build-work/$1" --precision "$precision" "${@:2}" > "$work/logs/build-$1.log" 2>&1
}
stamp "building resnet50 and bert ($precision) into $repo"
build resnet50 & resnet_pid=$!
build bert --shape minilm-l6 --max-length 256 --checkpoint "$carry" & bert_pid=$!
wait "$resnet_pid"; resnet_built=$?
wait "$bert_pid"; bert_built=$?
for family in resnet50 bert; do
    tail -3 "$work/logs/build-$family.log" | sed "s/^/[build $family] /"
done
[[ $resnet_built == 0 && $bert_built == 0 ]] || { stamp "a build failed (exit $resnet_built, $bert_built)"; exit 1; }
for model in resnet50_model bert_model; do
    stamp "$model as built:"
    sed -n '/^max_batch_size/p;/^instance_group/,/^}/p;/^dynamic_batching/,/^}/p' "$repo/$model/config.pbtxt"
done

# 3. One tune per model. Searched: GPU instances 1, 2, 4 and the dynamic batcher's queue
# delay 0 or 2 ms, beside the config as built (Model Analyzer's <model>_config_default, the
# same run); preferred batch sizes stay as built (a second call: TUNE_*_ARGS).
resnet_args=${TUNE_RESNET_ARGS:---instances 1,2,4 --queue-delays-us 0,2000 --concurrency 64,256}
bert_args=${TUNE_BERT_ARGS:---instances 1,2,4 --queue-delays-us 0,2000 --concurrency 64}
common=(--model-repository "$repo" --model-analyzer "$ma" --measurement-ms "${TUNE_MEASUREMENT_MS:-1000}")
status=0
tune() {  # model, seconds it may take, then tune's flags
    local model=$1 seconds=$2
    if ((seconds < 60)); then stamp "$model: skipped, $seconds s is too little"; status=1; return; fi
    stamp "tune $model (up to $seconds s)"
    # timeout signals the whole group: Model Analyzer, its tritonserver and perf_analyzer.
    timeout --kill-after=10 "$seconds" "$py" -m triton_kit.loadtest tune "$model" \
        --out "$work/runs/$model" "${common[@]}" "${@:3}"
    local code=$?
    stamp "tune $model: exit $code"
    ((code == 0)) || status=$code
}
# ResNet-50 first; BERT keeps at least TUNE_BERT_S (default 150 s) of what is left.
tune resnet50_model $(($(left) - pack - ${TUNE_BERT_S:-150})) \
    --slo-p99-ms "${TUNE_SLO_RESNET_MS:-150}" $resnet_args
tune bert_model $(($(left) - pack)) --slo-p99-ms "${TUNE_SLO_BERT_MS:-50}" \
    --shape "input_ids:$bert_length" --shape "attention_mask:$bert_length" $bert_args
exit $status
