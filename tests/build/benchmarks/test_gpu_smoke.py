"""triton_kit/benchmarks/gpu/run.py runs every step on CPU (``--smoke``): the H100 run does
not die of a typo.

The numbers of a smoke run are meaningless (tiny shapes, 2 cores); what is checked is that
every section ran, every served row was answered without errors, and the report names
each section. CUDA-only parts (graphs, CUDA shared memory, nvJPEG) are left out on CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT

ROOT = PROJECT_ROOT


@pytest.mark.slow
def test_smoke_run_measures_every_row(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "triton_kit.benchmarks.gpu", "--out", str(out), "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "gpu.json").read_text())
    failed = {s: d["errors"] for s, d in results.items() if isinstance(d, dict) and d.get("errors")}
    assert not failed, json.dumps(failed, indent=1)[-3000:]
    for family in ("resnet50", "bert-base", "bert-large", "minilm"):
        assert results[family]["in_process"], family
    expected = {
        "resnet50": {
            f"{engine}_{load}"
            for engine in ("graphs", "native1")
            for load in ("sequential_bs1", "bs1_c2", "bs2_c1")
        },
        "input": {"jpeg_bs1_c2", "uint8_640x480_bs1_c2", "jpeg_sequential_bs1"},
        "shm": {"uint8_640x480_bs1_c2_inline", "uint8_640x480_bs1_c2_system"},
        "minilm": {"minilm_bs1_c2", "minilm_ensemble_bs1_c2", "minilm_sequential_bs1"},
    }
    for section, labels in expected.items():
        served = results[section]["served"]
        assert labels <= set(served), (section, sorted(served))
        for label, row in served.items():
            assert row["requests"] > 0 and row["errors"] == 0, (section, label, row)
    report = (out / "gpu.md").read_text()
    for title in ("## resnet50", "## bert-large", "JPEG (nvJPEG", "shared memory", "MiniLM-L6"):
        assert title in report


def test_a_failing_load_worker_is_a_row_with_errors_not_a_hang(tmp_path: Path) -> None:
    """A worker's exception must not reach multiprocessing: tritonclient's exceptions do not
    unpickle (``msg`` is keyword-only in their args), which killed the pool's result thread
    and left served_load waiting for its grace period (the CI failure of the smoke run)."""
    import numpy as np

    from triton_kit.benchmarks.gpu.load import Load, served_load
    from triton_kit.benchmarks.gpu.settings import Settings
    from triton_kit.server import free_port

    url = f"127.0.0.1:{free_port()}"  # nothing listens: registering the region fails
    load = Load("m", [{"IMAGE": np.zeros((1, 4), np.uint8)}], "logits", shm="system")
    settings = Settings(out=tmp_path, device="cpu", seconds=0.2, processes=2, smoke=True)
    row = served_load(url, load, 2, settings)
    assert row["requests"] == 0 and row["errors"] == 2, row
    assert "UNAVAILABLE" in row["first_error"] or "connect" in row["first_error"], row
