"""triton_kit.loadtest.recorder's window edges with statistics that arrive, and its file format.

STAND-IN SERVER ON PURPOSE: a stdlib HTTP server answers the two Triton endpoints the
recorder reads (``GET v2/models/stats`` and ``GET v2/models/<name>/config``) with fixed
JSON in Triton's format, so the real StatsProbe (tritonclient.http) fetches them over a
socket; a real Triton cannot be made to hold exact counters. Expected values are the
JSON written here. tests/integration/loadtest/test_run.py reads the real server's statistics.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from triton_kit.loadtest import recorder
from triton_kit.loadtest.reports.stability import StabilityRule
from triton_kit.server import free_port

STATS = {
    "model_stats": [
        {
            "name": "bert",
            "version": "1",
            "execution_count": 2,
            "inference_count": 4,
            "inference_stats": {
                "success": {"count": 3, "ns": 300},
                "fail": {"count": 1, "ns": 5},
                "queue": {"count": 3, "ns": 30},
                "compute_input": {"count": 3, "ns": 7},
                "compute_infer": {"count": 3, "ns": 200},
                "compute_output": {"count": 3, "ns": 9},
            },
        }
    ]
}
BERT = {
    "success_count": 3,
    "success_ns": 300,
    "fail_count": 1,
    "execution_count": 2,
    "queue_ns": 30,
    "compute_input_ns": 7,
    "compute_infer_ns": 200,
    "compute_output_ns": 9,
    "inference_count": 4,
}


class Triton(BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Triton.paths.append(self.path)
        if self.path == "/v2/models/stats":
            body = STATS
        elif self.path == "/v2/models/bert/config":
            body = {"name": "bert", "platform": "ensemble"}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stats_url() -> Iterator[str]:
    Triton.paths = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Triton)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_fresh_recorder(tmp_path: Path) -> None:
    rec = recorder.Recorder("", tmp_path / "raw.npz")
    assert rec.probe is None and rec.is_worker is False and rec.ended is False
    assert rec.platforms == {} and rec.stability == {} and rec.models == [] and rec.steps == []
    assert rec._snapshot() == {}


def test_measured_window_reads_counters_at_both_edges(tmp_path: Path, stats_url: str) -> None:
    rec = recorder.Recorder(stats_url, tmp_path / "raw.npz")
    rec.begin_step(0, 1)
    assert rec.steps[0].stats_start == {}  # settling: not read yet
    rec.begin_measure()
    assert rec.steps[0].stats_start == {"bert": BERT}
    assert rec.platforms == {"bert": "ensemble"}
    rec.begin_step(1, 2)
    assert rec.steps[0].stats_end == {"bert": BERT}
    rec.end()
    assert rec.steps[1].stats_end == {}  # step 1 never measured: no second read
    # the platform is asked once; the statistics once per window edge
    assert Triton.paths == ["/v2/models/stats", "/v2/models/bert/config", "/v2/models/stats"]


def test_unavailable_statistics_are_logged_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rec = recorder.Recorder(f"http://127.0.0.1:{free_port()}", tmp_path / "raw.npz")
    assert rec._snapshot() == {}
    [record] = [r for r in caplog.records if r.name == "triton_kit.loadtest.recorder"]
    message = record.getMessage()
    assert message.startswith("Triton statistics unavailable: ")
    assert "refused" in message.lower(), message


def test_the_file_holds_typed_arrays(tmp_path: Path) -> None:
    rec = recorder.Recorder("", tmp_path / "raw.npz")
    rec.on_request(response_time=2.5, context={"model": "bert"})
    rec.on_request(response_time=3.5, exception=OSError(), context={"model": "nmt"})
    rec.dump()
    with np.load(tmp_path / "raw.npz") as data:
        dtypes = {key: data[key].dtype for key in data.files if key != "meta"}
        assert data["ok"].tolist() == [True, False]
        assert json.loads(str(data["meta"]))["models"] == ["bert", "nmt"]
    assert dtypes == {
        "t": np.float64,
        "ms": np.float64,
        "model": np.uint16,
        "ok": np.bool_,
        "cpu_t": np.float64,
        "cpu_s": np.float64,
    }


def test_a_file_without_cpu_samples_adds_no_trace(tmp_path: Path) -> None:
    rec = recorder.Recorder("", tmp_path / "raw.npz")
    rec.on_request(response_time=1.0, context={"model": "bert"})
    rec.dump()
    empty = np.array([], dtype=np.float64)
    np.savez(
        tmp_path / "raw.worker-1.npz",
        t=np.array([5.0]),
        ms=np.array([2.0]),
        model=np.array([0], dtype=np.uint16),
        ok=np.array([True]),
        cpu_t=empty,
        cpu_s=empty,
        meta=np.array(json.dumps({"models": ["bert"]})),
    )
    _, arrays, traces = recorder.load(tmp_path / "raw.npz")
    assert arrays["ms"].tolist() == [1.0, 2.0]
    assert len(traces) == 1


def test_a_sample_at_the_window_start_counts(tmp_path: Path) -> None:
    rule = StabilityRule(window_s=1.0, tolerance=0.5, windows=1, min_samples=1)
    rec = recorder.Recorder("", tmp_path / "raw.npz")
    rec.models.append("bert")
    for t in (99.5, 100.0):  # before the window, then exactly at its start
        rec.t.append(t)
        rec.ms.append(10.0)
        rec.model.append(0)
        rec.ok.append(True)
    assert rec.is_stable(rule, 100.0, 101.0)
    assert not rec.is_stable(rule, 100.25, 101.25)  # only the edge sample is outside
