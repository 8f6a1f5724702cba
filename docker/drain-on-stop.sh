#!/bin/sh
# Run tritonserver ("$@") and drain it before it stops: the compose stop path.
# `docker compose stop` SIGTERMs this script (PID 1); it unloads the entry models and waits
# for their in-flight work (triton_kit/server/drain.py, at most TRITON_KIT_DRAIN_TIMEOUT_S), then
# SIGTERMs tritonserver, whose --exit-timeout-secs covers what still runs. Triton must run
# with --model-control-mode=explicit --load-model=* and key TRITON_KIT_API_KEY.
# python3 -S: the drain needs the stdlib and PYTHONPATH only (what the image copies).
# stop_grace_period must exceed the drain timeout plus --exit-timeout-secs.
set -u
"$@" &
child=$!
draining=0

on_stop() {
    interrupted=1
    if [ "$draining" = 0 ]; then
        draining=1
        python3 -S -m triton_kit.server.drain \
            --url "${TRITON_KIT_DRAIN_URL:-http://127.0.0.1:8000}" \
            --timeout "${TRITON_KIT_DRAIN_TIMEOUT_S:-30}" ||
            echo "drain-on-stop: drain incomplete, stopping anyway" >&2
    fi
    kill -TERM "$child" 2>/dev/null
}
trap on_stop TERM INT

# A trapped signal cuts `wait` short (status > 128): wait again for tritonserver's own exit.
status=0
while :; do
    interrupted=0
    wait "$child"
    code=$?
    [ "$interrupted" = 1 ] && [ "$code" != 127 ] && continue
    [ "$code" != 127 ] && status=$code
    break
done
exit "$status"
