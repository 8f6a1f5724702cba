#!/usr/bin/env bash
# The native backtrace of AOTInductor's package load on the lent GPU machine (issue 30): a CPU
# MLP package (no GPU code involved) is built, then loaded under cuda-gdb (the machine has no
# gdb). aoti_crash.py showed that even this load dies with SIGSEGV there, not here.
# Usage: bash scripts/gpu/diagnostics/aoti_backtrace.sh OUT_DIR
set -uo pipefail
out=$1; work=$(mktemp -d)
py=${PYTHON:-$(command -v python3)}
build=$(sed -n '/^BUILD = r"""/,/^"""/p' scripts/gpu/diagnostics/aoti_crash.py | sed '1d;$d')
load=$(sed -n '/^LOAD = r"""/,/^"""/p' scripts/gpu/diagnostics/aoti_crash.py | sed '1d;$d')
printf '%s\n' "$load" > "$work/load.py"
timeout 200 "$py" -c "$build" cpu "$work/mlp.pt2" > "$out/build.log" 2>&1; echo "build rc $?" | tee -a "$out/build.log"
timeout 200 cuda-gdb -batch -ex 'set pagination off' -ex 'set print thread-events off' -ex run \
    -ex 'bt 40' -ex 'info symbol $pc' -ex 'x/12i $pc-16' -ex 'info registers' \
    --args "$py" "$work/load.py" cpu "$work/mlp.pt2" > "$out/gdb.log" 2>&1
echo "gdb rc $?" >> "$out/gdb.log"
(cd "$work" && unzip -o -q mlp.pt2 && find . -name '*.so' -exec sh -c 'readelf -SW "$1" | grep -E "constants|lrodata|ldata"; nm -D "$1" | grep -i -E " T |constants" | head -30' _ {} \;) > "$out/so.log" 2>&1
