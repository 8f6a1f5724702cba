#!/usr/bin/env bash
# On the lent GPU: mutmut over triton_kit/server/backends/pytorch/model.py against
# tests/unit/server/test_pytorch_backend.py, whose `gpu` test drives the CUDA branches (device
# choice, a graph per graph_spec, padding, the pinned copy) that no CPU run can reach.
# The project's [tool.mutmut] is narrowed to that module and that test file in this copy
# of the checkout only (the lent machine builds no model repository for the other tests).
# Usage (here: pip download mutmut 3.8.1 and its missing deps for Python 3.12 into a
# folder, e.g. .mut): scripts/gpu/mutation.sh WHEEL_DIR OUT_DIR [CHILDREN]
set -euo pipefail
wheels=$1; out=$2; children=${3:-12}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/mutmut-site "$wheels"/*.whl
export PYTHONPATH=/tmp/mutmut-site PYTHONUNBUFFERED=1
python3 - <<'PY'
import re
from pathlib import Path

path = Path("pyproject.toml")
text = path.read_text()
text = re.sub(r"(?ms)^source_paths = \[.*?\]\n", 'source_paths = ["triton_kit/server/backends/pytorch/"]\n', text)
text = re.sub(
    r"(?ms)^pytest_add_cli_args_test_selection = \[.*?\]\n",
    'pytest_add_cli_args_test_selection = ["tests/unit/server/test_pytorch_backend.py"]\n',
    text,
)
# The other source paths are not copied as mutants any more: copy triton_kit/python_models/ as is (here
# it is importable only from the checkout, which the mutants' tests do not see).
text = text.replace('also_copy = ["tests/",', 'also_copy = ["triton_kit/python_models/", "tests/",', 1)
path.write_text(text)
PY
grep -A2 "^source_paths\|^pytest_add_cli_args_test_selection" pyproject.toml | tee "$out/mutmut-config.txt"
nvidia-smi -L >> "$out/mutmut-config.txt" 2>&1 || true
set +e
rm -rf mutants  # a warm machine keeps the last run's results: mutmut would only read them back
python3 -m mutmut run --max-children "$children" > "$out/mutmut-run.txt" 2>&1
echo "mutmut run exit: $?" >> "$out/mutmut-run.txt"
python3 -m mutmut results --all true > "$out/mutmut-results.txt" 2>&1 || python3 -m mutmut results > "$out/mutmut-results.txt" 2>&1
tail -5 "$out/mutmut-run.txt"
