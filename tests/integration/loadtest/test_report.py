"""The stepped-run reports: flags, SLO capacity, metadata, plots and index.html.

Pure parts are checked on hand-made steps; the whole chain through a real short
``python -m triton_kit.loadtest run`` against the session's Triton, with index.html rendered in
headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from PIL import Image
from tritonclient.grpc import model_config_pb2

from tests.support.prerequisites import MODEL_REPOSITORY, PROJECT_ROOT, require_models, require_tool
from triton_kit.loadtest.metadata import ModelSettings
from triton_kit.loadtest.reports import files as report
from triton_kit.loadtest.reports.files import MIN_P99_SAMPLES, markdown
from triton_kit.loadtest.reports.slo import Slo, capacities
from triton_kit.loadtest.reports.summary import StepResult
from triton_kit.server import TritonServer

ROOT = PROJECT_ROOT


def _step(requests: int, p99: float, users: int = 1, rps: float = 10.0, protocol: str = "grpc",
          failures: int = 0) -> StepResult:  # fmt: skip
    return StepResult(protocol, "bert", users, 5.0, requests, failures, 1.0, 2.0, 3.0, p99, rps, ())


def test_p99_from_few_samples_is_flagged_and_windows_are_named() -> None:
    text = markdown([_step(3, 9.87), _step(MIN_P99_SAMPLES, 4.56)])
    rows = [line for line in text.splitlines() if line.startswith("| grpc | bert")]
    assert "| 9.87 † |" in rows[0], rows[0]
    assert "| 4.56 |" in rows[1] and "†" not in rows[1], rows[1]
    assert "Locust's own `<protocol>/locust.html`" in text and "settle" in text


def test_capacity_is_the_highest_throughput_step_within_the_slo() -> None:
    steps = [
        _step(500, 20.0, users=1, rps=100.0),
        _step(800, 45.0, users=2, rps=160.0),  # the answer: meets 50 ms, highest rate
        _step(900, 80.0, users=4, rps=180.0),  # breaches p99
        _step(50, 10.0, users=8, rps=190.0),  # too few samples to trust its p99
        _step(600, 30.0, users=2, rps=90.0, protocol="http", failures=60),  # 10 % errors
        _step(600, 35.0, users=1, rps=95.0, protocol="http"),
    ]
    found = {c.protocol: c for c in capacities(steps, Slo(p99_ms=50.0, error_ratio=0.01))}
    assert found["grpc"].best is steps[1]
    assert found["grpc"].sentence() == (
        "grpc bert: 160.0 req/s at 2 users with p99 45.00 ms <= 50 ms"
    )
    assert found["http"].best is steps[5]
    assert "the limit may lie above" not in found["http"].sentence()  # 2 users were tried
    none = capacities([steps[2]], Slo(p99_ms=50.0))
    assert none[0].sentence() == "grpc bert: no step met p99 <= 50 ms"
    top = capacities([steps[0]], Slo(p99_ms=50.0))[0].sentence()
    assert top.endswith("(the highest step tested: the limit may lie above)")
    assert capacities(steps, Slo()) == []  # no p99 SLO, no question to answer


def test_model_settings_from_triton_json() -> None:
    config = {
        "name": "m", "backend": "python", "max_batch_size": 8,
        "instance_group": [{"count": 2, "kind": "KIND_CPU"}, {"count": 1, "kind": "KIND_GPU"}],
        "dynamic_batching": {"max_queue_delay_microseconds": "500", "preferred_batch_size": [4]},
    }  # fmt: skip
    settings = ModelSettings.of(config)
    assert settings == ModelSettings("m", "python", 8, "2 x KIND_CPU, 1 x KIND_GPU", 500, (4,))
    assert ModelSettings.of({"name": "e", "platform": "ensemble"}).max_queue_delay_us is None


def _pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3)


def _has(pixels: np.ndarray, colour: str) -> bool:
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return bool(np.any(np.abs(pixels.astype(int) - rgb).sum(axis=1) <= 24))


def test_plots_colour_each_protocol_and_percentile_and_draw_the_slo(tmp_path: Path) -> None:
    steps = [
        StepResult(
            p, "bert", u, 5.0, 500, 0, k * u, 1.2 * k * u, 1.4 * k * u, 2 * k * u, 50.0 * u, ()
        )
        for p, k in (("grpc", 10.0), ("http", 13.0))
        for u in (1, 2, 4)
    ]
    written = report.write_plots(steps, tmp_path, slo_p99_ms=60.0)
    assert [p.name for p in written] == ["latency.png", "curve.png", "throughput.png"]
    colours = [c for by_p in report.PERCENTILE_COLOURS.values() for c in by_p.values()]
    assert len(set(colours)) == len(colours) == 8
    latency = np.asarray(Image.open(tmp_path / "latency.png").convert("RGB"))
    everywhere = latency.reshape(-1, 3)
    for colour in [*colours, report.SLO_COLOUR]:  # every line, and the SLO line
        assert _has(everywhere, colour), colour
    # The legend sits right of the panel: the p99 colours show up in the rightmost part too.
    right = latency[:, int(latency.shape[1] * 0.8) :].reshape(-1, 3)
    assert _has(right, report.PERCENTILE_COLOURS["grpc"][99])
    curve = _pixels(tmp_path / "curve.png")
    assert _has(curve, report.SLO_COLOUR) and _has(curve, report.PERCENTILE_COLOURS["http"][99])


def _served_config(model: str) -> model_config_pb2.ModelConfig:
    """The reference: the config.pbtxt on disk, parsed with Triton's own protobuf schema."""
    text = (MODEL_REPOSITORY / model / "config.pbtxt").read_text()
    return text_format.Parse(text, model_config_pb2.ModelConfig(), allow_unknown_field=True)


def _chromium_dom(page: Path, profile: Path) -> str:
    chromium = require_tool("chromium")
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
        "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_run_reports_capacity_metadata_and_an_index_chromium_renders(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    require_models("bert")
    out = tmp_path / "run"
    command = [sys.executable, "-m", "triton_kit.loadtest", "run", "--out", str(out),
               "--models", "bert", "--host", triton_server.grpc_url, "--steps", "1,2",
               "--step-time", "4", "--settle-time", "1", "--slo-p99-ms", "100000"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    rows = json.loads((out / "summary.json").read_text())
    best = max((r for r in rows if r["requests"] >= MIN_P99_SAMPLES),
               key=lambda r: r["throughput_rps"])  # fmt: skip
    line = (f"grpc bert: {best['throughput_rps']:.1f} req/s at {best['users']} users with "
            f"p99 {best['p99_ms']:.2f} ms <= 100000 ms")  # fmt: skip
    assert line in done.stdout, done.stdout[-3000:]
    assert line in (out / "summary.md").read_text()

    meta = json.loads((out / "metadata.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", meta["commit"]), meta["commit"]
    assert meta["machine"]["cpu_count"] == str(os.cpu_count())
    assert meta["versions"]["triton"] == triton_server_version(triton_server)
    served = {m["name"]: m for m in meta["models"]}
    assert {"bert", "bert_model", "bert_preprocess"} <= set(served), sorted(served)
    for name in ("bert_model", "bert_preprocess"):
        reference = _served_config(name)
        assert served[name]["max_batch_size"] == reference.max_batch_size
        count = reference.instance_group[0].count or 1
        assert served[name]["instances"].startswith(f"{count} x "), served[name]
        delay = reference.dynamic_batching.max_queue_delay_microseconds
        assert served[name]["max_queue_delay_us"] == delay
    assert "## Run" in (out / "summary.md").read_text()

    dom = _chromium_dom(out / "index.html", tmp_path / "chromium-profile")
    for element in ('id="summary-table"', 'id="capacity"', 'id="metadata"',
                    'id="model-configs"', 'id="plot-curve"', 'id="plot-latency"',
                    'id="plot-throughput"', 'href="grpc/locust.html"'):  # fmt: skip
        assert element in dom, element
    assert '<p id="plots-loaded">3 of 3 plots loaded</p>' in dom
    assert dom.count("<tr><td") >= len(rows) + 3  # a row per step, and per Triton model
    assert line.replace("<", "&lt;") in dom
    assert (out / "grpc" / "locust.html").stat().st_size > 0


def triton_server_version(server: TritonServer) -> str:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    try:
        return client.get_server_metadata().version
    finally:
        client.close()
