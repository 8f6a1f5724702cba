"""triton_kit/benchmarks/gpu/pipelines runs every step on CPU (``--smoke``): the kit's builds,
the pipelines in process, the built repository served by the launcher and measured by
perf_analyzer and the SDK, the report. The H100 run must not die of a typo.

Numbers of a smoke run are meaningless (a tiny ResNet, 2 shared cores); what is checked is
that every step ran without an error, every served row went through the steps the
repository says it composes, and the report has its sections. Needs perf_analyzer
(scripts/install-perf-analyzer.sh) and Triton's native pytorch backend (``make backends``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.benchmarks.harness import perf_analyzer

# The models each served model's requests must reach (ensemble steps, BLS callees).
STEPS = {
    "resnet50": {"resnet50", "resnet50_preprocess", "resnet50_model", "resnet50_postprocess"},
    "resnet50_uint8": {"resnet50_uint8", "resnet50_uint8_preprocess", "resnet50_model"},
    "bert": {"bert", "bert_model"},
    "nmt": {"nmt"},
}


@pytest.mark.slow
def test_smoke_run_measures_every_model_every_way(tmp_path: Path) -> None:
    if perf_analyzer.binary() is None:
        pytest.skip("perf_analyzer is not installed (scripts/install-perf-analyzer.sh)")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "triton_kit.benchmarks.gpu.pipelines", "--out", str(out),
         "--smoke"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((out / "pipelines.json").read_text())
    assert not data.get("errors"), json.dumps(data["errors"], indent=1)[-4000:]
    assert not data.get("skipped"), data["skipped"]
    for family in ("resnet50", "bert", "nmt"):
        assert data[f"build {family}"]["command"].startswith(
            f"python -m triton_kit.build_engines {family} --engine torch"
        )
    for model, steps in STEPS.items():
        local = data[f"in-process {model}"]
        assert {"bs1", f"bs{local['max_batch']}"} <= set(local), model
        rows = data[f"served {model}"]
        assert set(rows) == {"c1", "c2"}, model
        for row in rows.values():
            assert row["items_per_s"] > 0, (model, row)
            assert steps <= set(row["steps"]), (model, sorted(row["steps"]))
            assert all(s["failed"] == 0 for s in row["steps"].values()), (model, row)
    for model in ("resnet50", "bert"):
        assert data[f"sdk {model}"]["sequential"]["calls"] > 0
    report = (out / "pipelines.md").read_text()
    for title in ("## Summary", "## Triton's statistics per step", "## In process", "## The SDK"):
        assert title in report
