#!/usr/bin/env bash
# Here: the carry for scripts/gpu/goals.sh (every goal of issue 30 in one run on the lent GPU
# machine). GOALS_CARRY (default .whl-goals, git-ignored) gets what scripts/gpu/prepare_aoti.sh
# takes from CARRY (default .whl, made by scripts/gpu/prepare.sh), plus what the pipelines need:
# tokenizer.json and the numpy 1.26 wheel for the python stubs, repacked without numpy's tests,
# headers, distutils and type stubs (16 MB instead of 18 MB), so that the carry and the checkout
# stay under the 64 MiB a call carries. GOALS_FOR picks the calls the carry is for, when all
# of it and the checkout would outgrow that: engines (the resnet50, bert-base, bert-large and
# pytest steps: no numpy wheel, as nothing runs in a python stub), pipelines (the pipelines and
# launcher steps: no cuda-python, as nothing uses CUDA shared memory), or all (default).
set -euo pipefail
goals=${1:-.whl-goals}
carry=${2:-.whl}
bash "$(dirname "$0")/prepare_aoti.sh" "$goals" "$carry" > /dev/null
cp -al "$carry/tokenizer.json" "$goals/"
case ${GOALS_FOR:-all} in
    engines) du -sh "$goals"; exit 0 ;;
    pipelines) rm -f "$goals/cuda-shm.tar.xz" ;;
    all) ;;
    *) echo "GOALS_FOR: engines, pipelines or all" >&2; exit 2 ;;
esac
wheel=$(realpath "$(ls "$carry"/numpy-1.26*.whl)")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && unzip -q "$wheel")
rm -rf "$work"/numpy/*/tests "$work/numpy/tests" "$work/numpy/distutils" "$work/numpy/core/include" \
    "$work/numpy/random/_examples"
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
(cd "$work" && zip -q -9 -r "$OLDPWD/$goals/$(basename "$wheel")" .)
du -sh "$goals"
echo "carry and checkout: $(( $(du -sm "$goals" | cut -f1) + $(git ls-files -z | du -c --files0-from=- -b | tail -1 | cut -f1) / 1048576 )) MiB (at most 64)"
