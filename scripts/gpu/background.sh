#!/usr/bin/env bash
# On the lent GPU machine: a run longer than one device call (10 minutes). `start` launches
# scripts/gpu/bench.sh in a process session of its own, which outlives the call as long as the
# next call comes within the machine's 30 s of grace; `wait` (each later call) waits for it.
# Both end by packing what the run has written so far into OUT/run.tgz, so a machine taken back
# mid-run loses only what came after the last call.
#   bash scripts/gpu/background.sh start CARRY OUT [bench.sh arguments after OUT_DIR]
#       (default: --script scripts/gpu/goals.sh)
#   bash scripts/gpu/background.sh wait OUT
# WAIT_S (default 540) bounds each call's wait; the run's files are under RUN_DIR (/tmp/run).
# The machine also goes back, at the end of the call in flight, once the session has held
# machines for 30 minutes in all (the lease's held_s): start such a run early in a session (issue
# 30's call 33 was lost in its BERT-base step that way; gpu/issue30-goals/call33-partial).
set -uo pipefail
run=${RUN_DIR:-/tmp/run}
wait_s=${WAIT_S:-540}
collect() {
    local out=$1 started=$SECONDS
    while [[ ! -f "$run/out/done" ]] && (( SECONDS - started < wait_s )); do
        if ! pgrep -f "scripts/gpu/bench.sh" > /dev/null; then break; fi
        sleep 5
    done
    tail -n 40 "$run/bench.log"
    [[ -f "$run/out/done" ]] && echo "run: done" || echo "run: still going (or ended without done)"
    # Packages and engines stay out; logs, JSON, CSV and reports come back.
    tar -C "$run" --exclude='*.pt2' --exclude='*.pt' --exclude='*.onnx' --exclude='*.plan' \
        --exclude='*.safetensors' -czf "$1/run.tgz" . 2>/dev/null
    ls -la "$1/run.tgz"
}
case ${1:-} in
    start)
        carry=$2; out=$3; shift 3
        rm -rf "$run" && mkdir -p "$run/out"
        (($#)) || set -- --script scripts/gpu/goals.sh
        setsid nohup bash scripts/gpu/bench.sh "$carry" "$run/out" "$@" > "$run/bench.log" 2>&1 < /dev/null &
        sleep 5
        collect "$out" ;;
    wait) collect "$2" ;;
    *) echo "usage: $0 start CARRY OUT [bench.sh args] | wait OUT" >&2; exit 2 ;;
esac
