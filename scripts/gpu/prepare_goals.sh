#!/usr/bin/env bash
# Here: the carry for scripts/gpu/goals.sh (every goal of issue 30 in one run on the lent GPU
# machine). GOALS_CARRY (default .whl-goals, git-ignored) gets what scripts/gpu/prepare_aoti.sh
# takes from CARRY (default .whl, made by scripts/gpu/prepare.sh), plus what the pipelines need:
# tokenizer.json and numpy 1.26 for the python stubs, without numpy's tests, headers, distutils,
# f2py, array_api and type stubs, as numpy-stub.tar.xz (8 MB; the wheel, 15 MB, spent most of
# its size on OpenBLAS, which xz packs tighter than a wheel's zip). bench.sh unpacks it into the
# stubs' venv.
# GOALS_FOR picks the calls the carry is for, when all of it and the checkout would outgrow the
# 64 MiB a call carries (scripts/gpu/carry_size.py counts as the call does, and this script
# fails when it is over): engines (the resnet50, bert-base, bert-large and pytest steps: no
# numpy, as nothing runs in a python stub), pipelines (the pipelines and launcher steps: no
# cuda-python, as nothing uses CUDA shared memory), or all (default).
set -euo pipefail
goals=${1:-.whl-goals}
carry=${2:-.whl}
bash "$(dirname "$0")/prepare_aoti.sh" "$goals" "$carry" > /dev/null
cp -al "$carry/tokenizer.json" "$goals/"
# The pytorch_aoti backend a device call built and packed (OUT/prebuilt/aoti-prebuilt.tar.xz,
# copied here into the git-ignored .gpu-prebuilt/): bench.sh takes it where its inputs and torch
# match and it links (scripts/gpu/aoti_prebuilt.sh); else it builds as before.
if [[ -f .gpu-prebuilt/aoti-prebuilt.tar.xz ]]; then cp -l .gpu-prebuilt/aoti-prebuilt.tar.xz "$goals/"; fi
case ${GOALS_FOR:-all} in
    engines) exec python3 "$(dirname "$0")/carry_size.py" "$goals" ;;
    pipelines) rm -f "$goals/cuda-shm.tar.xz" ;;
    all) ;;
    *) echo "GOALS_FOR: engines, pipelines or all" >&2; exit 2 ;;
esac
wheel=$(realpath "$(ls "$carry"/numpy-1.26*.whl)")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && unzip -q "$wheel")
rm -rf "$work"/numpy/*/tests "$work/numpy/tests" "$work/numpy/distutils" "$work/numpy/core/include" \
    "$work/numpy/random/_examples" "$work/numpy/f2py" "$work/numpy/array_api" "$work/numpy/_pyinstaller"
find "$work/numpy" \( -name '*.pyi' -o -name '*.pxd' \) -delete
# RECORD lists what the wheel holds: the removed files leave it too.
python3 - "$work" <<'PY'
import csv, sys
from pathlib import Path
root = Path(sys.argv[1])
(record,) = root.glob("*.dist-info/RECORD")
rows = [r for r in csv.reader(record.open()) if (root / r[0]).exists()]
with record.open("w", newline="") as sink:
    csv.writer(sink).writerows(rows)
PY
tar -C "$work" -cJf "$goals/numpy-stub.tar.xz" .
python3 "$(dirname "$0")/carry_size.py" "$goals"
