"""triton_kit.loadtest.recorder and the summary built on its files, without Locust or a server.

A real Recorder is driven by hand (the calls Locust's events and the stepped shape make)
against a closed loopback port, so Triton's statistics are unavailable, as when the
server does not answer. Expected values are written out here.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

from triton_kit.loadtest import recorder
from triton_kit.loadtest.reports.summary import ServerTime, StepResult, load_results, step_results
from triton_kit.loadtest.triton_stats import ModelCounters
from triton_kit.server import free_port


@pytest.fixture
def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def _counters(**values: int) -> dict[str, int]:
    fields = dict(
        success_count=0,
        success_ns=0,
        fail_count=0,
        execution_count=0,
        queue_ns=0,
        compute_input_ns=0,
        compute_infer_ns=0,
        compute_output_ns=0,
    )
    return {**fields, **values}


def test_on_request_keeps_only_events_with_a_model(tmp_path: Path, closed_url: str) -> None:
    rec = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    before = time.time()
    rec.on_request(response_time=1.5, context={"model": "bert"})
    rec.on_request(response_time=2.5, exception=RuntimeError("x"), context={"model": "nmt"})
    rec.on_request(response_time=3.5, context={"model": "bert", "task": "t"})
    rec.on_request(response_time=9.0, context=None)  # another user's event
    rec.on_request(response_time=9.0, context="not a dict")
    rec.on_request(response_time=9.0, context={"task": "no model"})
    assert rec.models == ["bert", "nmt"]
    assert list(rec.ms) == [1.5, 2.5, 3.5]
    assert list(rec.model) == [0, 1, 0]
    assert list(rec.ok) == [1, 0, 1]
    assert len(rec.t) == 3 and before <= rec.t[0] <= rec.t[2] <= time.time()


def test_steps_and_windows_without_server_statistics(
    tmp_path: Path, closed_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    rec = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    rec.begin_measure()  # before any step: nothing happens
    assert rec.steps == []
    rec.begin_step(0, 1)
    assert rec.steps[0].index == 0 and rec.steps[0].users == 1
    assert rec.steps[0].measure_start is None and rec.steps[0].end is None
    rec.begin_measure()
    first_measure = rec.steps[0].measure_start
    assert first_measure is not None
    assert "Triton statistics unavailable" in caplog.text
    assert rec.steps[0].stats_start == {}
    rec.begin_measure()  # a second mark keeps the first instant
    assert rec.steps[0].measure_start == first_measure
    rec.begin_step(1, 4)
    first = rec.steps[0]
    assert first.end is not None and first.end >= first_measure
    assert rec.steps[1].users == 4 and rec.steps[1].start >= first.end
    rec.end()
    assert rec.steps[1].end is not None and rec.steps[1].stats_end == {}  # never measured
    end = rec.steps[1].end
    rec.end()
    assert rec.steps[1].end == end and rec.ended


def test_end_without_steps_only_marks_the_end(tmp_path: Path, closed_url: str) -> None:
    rec = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    rec.end()
    assert rec.ended and rec.steps == []


def test_dump_and_load_round_trip(tmp_path: Path, closed_url: str) -> None:
    rec = recorder.Recorder(closed_url, tmp_path / "out" / "deep" / "raw.npz")
    rec.stability = {"window_s": 0.0}
    rec.platforms = {"bert": "ensemble"}
    rec.begin_step(0, 2)
    rec.on_request(response_time=4.0, context={"model": "bert"})
    rec.on_request(response_time=6.0, exception=ValueError(), context={"model": "bert"})
    rec.dump()
    path = tmp_path / "out" / "deep" / "raw.npz"  # folders made as needed
    assert path.exists() and list(tmp_path.glob("out/deep/raw.worker-*")) == []
    meta, arrays, traces = recorder.load(path)
    assert meta["host"] == closed_url and meta["models"] == ["bert"]
    assert meta["platforms"] == {"bert": "ensemble"} and meta["stability"] == {"window_s": 0.0}
    assert [s["users"] for s in meta["steps"]] == [2] and meta["steps"][0]["end"] is not None
    assert arrays["ms"].tolist() == [4.0, 6.0] and arrays["ok"].tolist() == [True, False]
    assert arrays["ok"].dtype == bool and arrays["model"].dtype == np.uint16
    assert arrays["model"].tolist() == [0, 0]
    assert len(traces) == 1 and len(traces[0][0]) == 1  # dump samples the CPU once


def test_a_worker_writes_its_own_file_and_load_merges_model_numbers(
    tmp_path: Path, closed_url: str
) -> None:
    master = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    master.begin_step(0, 1)
    worker = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    worker.is_worker = True
    worker.on_request(response_time=1.0, context={"model": "nmt"})
    worker.on_request(response_time=2.0, context={"model": "bert"})
    worker.on_request(response_time=3.0, exception=OSError(), context={"model": "resnet50"})
    worker.sample_cpu()
    worker.dump()
    assert (tmp_path / f"raw.worker-{os.getpid()}.npz").exists()
    assert not worker.ended  # a worker does not close the master's steps
    master.on_request(response_time=5.0, context={"model": "bert"})
    master.dump()
    meta, arrays, traces = recorder.load(tmp_path / "raw.npz")
    assert meta["models"] == ["bert", "nmt", "resnet50"]  # the master's first, then new ones
    assert arrays["ms"].tolist() == [5.0, 1.0, 2.0, 3.0]
    assert arrays["model"].tolist() == [0, 1, 0, 2]  # the worker's 0 (nmt) is merged 1
    assert arrays["ok"].tolist() == [True, True, True, False]
    assert len(traces) == 2 and len(traces[1][0]) == 2
    assert len(meta["steps"]) == 1


def test_load_merges_an_empty_worker(tmp_path: Path, closed_url: str) -> None:
    master = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    master.on_request(response_time=5.0, context={"model": "bert"})
    idle = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    idle.is_worker = True
    idle.dump()
    master.dump()
    meta, arrays, _ = recorder.load(tmp_path / "raw.npz")
    assert meta["models"] == ["bert"] and arrays["model"].tolist() == [0]
    assert arrays["model"].dtype == np.uint16


def test_cpu_seconds_interpolates_over_every_process() -> None:
    traces = [
        (np.array([0.0, 10.0]), np.array([0.0, 5.0])),  # half a core
        (np.array([0.0, 4.0, 8.0]), np.array([1.0, 1.0, 5.0])),  # idle, then a full core
        (np.array([3.0]), np.array([2.0])),  # one sample: no rate, ignored
    ]
    # [2, 6]: process 1 spends 2 s; process 2 spends 2 s (from 4 to 6).
    assert recorder.cpu_seconds(traces, 2.0, 6.0) == pytest.approx(4.0)
    assert recorder.cpu_seconds(traces[:1], 0.0, 10.0) == pytest.approx(5.0)
    assert math.isnan(recorder.cpu_seconds([], 0.0, 1.0))
    assert recorder.cpu_seconds(traces[2:], 0.0, 9.0) == 0.0


def test_counters_rebuild_model_counters() -> None:
    raw = {"bert": _counters(success_count=3, queue_ns=7)}
    assert recorder.counters(raw) == {
        "bert": ModelCounters(
            success_count=3,
            success_ns=0,
            fail_count=0,
            execution_count=0,
            queue_ns=7,
            compute_input_ns=0,
            compute_infer_ns=0,
            compute_output_ns=0,
        )
    }


def test_is_stable_sees_only_samples_after_begin(tmp_path: Path, closed_url: str) -> None:
    from triton_kit.loadtest.reports.stability import StabilityRule

    rec = recorder.Recorder(closed_url, tmp_path / "raw.npz")
    rule = StabilityRule(window_s=1.0, tolerance=0.5, windows=2, min_samples=1)
    now = time.time()
    assert not rec.is_stable(rule, now - 2, now)  # no samples at all
    for t in np.arange(now - 2, now, 0.05):
        rec.t.append(float(t))
        rec.ms.append(10.0)
        rec.model.append(0)
        rec.ok.append(True)
    rec.models.append("bert")
    assert rec.is_stable(rule, now - 2, now)
    assert not rec.is_stable(rule, now + 10, now + 12)  # nothing after begin


def test_load_results_of_a_written_run(tmp_path: Path) -> None:
    """summary.load_results over a file written by np.savez here: exact values."""
    t0 = 1000.0
    steps = [
        {
            "index": 0,
            "users": 2,
            "start": t0,
            "measure_start": t0 + 1,
            "end": t0 + 5,
            "stats_start": {"bert": _counters(), "bert_model": _counters()},
            "stats_end": {
                "bert": _counters(success_count=8, queue_ns=8_000_000),
                "bert_model": _counters(success_count=8, compute_infer_ns=16_000_000),
                "nmt": _counters(success_count=1),
            },
        },
        {"index": 1, "users": 4, "start": t0 + 5, "measure_start": None, "end": t0 + 9},
    ]
    meta = {"host": "h", "models": ["bert"], "platforms": {"bert": "ensemble"}, "steps": steps}
    # Times: two settling samples, four in the window (one failed), one at the end edge.
    t = np.array([t0 + 0.5, t0 + 0.9, t0 + 1.0, t0 + 2, t0 + 3, t0 + 4.9, t0 + 5.0])
    np.savez(
        tmp_path / "raw.npz",
        t=t,
        ms=np.array([100.0, 100.0, 10.0, 20.0, 30.0, 40.0, 100.0]),
        model=np.zeros(7, dtype=np.uint16),
        ok=np.array([1, 1, 1, 1, 0, 1, 1], dtype=bool),
        cpu_t=np.array([t0, t0 + 9]),
        cpu_s=np.array([0.0, 4.5]),
        meta=np.array(json.dumps(meta)),
    )
    (row,) = load_results(tmp_path / "raw.npz", "http")
    assert row.protocol == "http" and row.model == "bert" and row.users == 2
    assert row.window_s == 4.0 and row.requests == 4 and row.failures == 1
    assert row.throughput_rps == pytest.approx(3 / 4)
    # Successful samples 10, 20, 40: numpy's linear percentiles.
    assert (row.p50_ms, row.p90_ms, row.p95_ms, row.p99_ms) == pytest.approx(
        (20.0, 36.0, 38.0, 39.6)
    )
    assert row.server == (ServerTime("bert", 8, 1.0, 0.0), ServerTime("bert_model", 8, 0.0, 2.0))
    assert row.platform == "ensemble" and row.stable is None
    assert row.client_cpu_s == pytest.approx(2.0) and row.client_cpu_ratio == pytest.approx(0.5)
    assert row.error_ratio == 0.25
    assert row.server_split_ms == (0.0, 2.0)  # an ensemble: its parts' times


def test_step_results_skip_steps_without_a_window() -> None:
    meta = {
        "models": ["m"],
        "steps": [
            {"users": 1, "measure_start": None, "end": 5.0},
            {"users": 1, "measure_start": 5.0, "end": None},
            {"users": 1, "measure_start": 5.0, "end": 5.0},
        ],
    }
    arrays = {"t": np.array([5.0]), "ms": np.array([1.0]), "ok": np.array([True])}
    arrays["model"] = np.array([0], dtype=np.uint16)
    assert step_results(meta, arrays, "grpc") == []


def test_as_dict_carries_the_ratios() -> None:
    row = StepResult("grpc", "m", 1, 2.0, 10, 1, 1.0, 2.0, 3.0, 4.0, 4.5, (), client_cpu_s=1.0)
    data = row.as_dict()
    assert data["error_ratio"] == 0.1 and data["client_cpu_ratio"] == 0.5
    assert data["p99_ms"] == 4.0 and data["server"] == () and data["stable"] is None
    assert StepResult("g", "m", 1, 0.0, 0, 0, 0, 0, 0, 0, 0, ()).error_ratio == 0.0
    assert math.isnan(StepResult("g", "m", 1, 0.0, 0, 0, 0, 0, 0, 0, 0, ()).client_cpu_ratio)


def test_a_worker_started_without_host_records(tmp_path: Path) -> None:
    """`locust --worker --raw-out F` with no --host (compose's workers): the master sends it."""
    worker = recorder.Recorder("", tmp_path / "raw.npz")
    worker.is_worker = True
    worker.begin_step(0, 1)
    worker.begin_measure()
    assert worker.steps[0].stats_start == {}
    worker.on_request(response_time=1.0, context={"model": "bert"})
    worker.dump()
    assert (tmp_path / f"raw.worker-{os.getpid()}.npz").exists()


def _steady(t0: float, seconds: int, per_second: int) -> dict[str, np.ndarray]:
    t = t0 + np.arange(seconds * per_second) / per_second
    return {
        "t": t,
        "ms": np.full(t.size, 10.0),
        "ok": np.ones(t.size, dtype=bool),
        "model": np.zeros(t.size, dtype=np.uint16),
    }


RULE = {"window_s": 1.0, "tolerance": 0.1, "windows": 3, "min_samples": 5}


def _one_step(stability: dict | None, **extra) -> dict:
    step = {"users": 1, "measure_start": 1000.0, "end": 1004.0, **extra}
    meta = {"models": ["m"], "steps": [step]}
    if stability is not None:
        meta["stability"] = stability
    return meta


def test_step_results_judge_stability_when_the_run_had_a_rule() -> None:
    steady = _steady(1000.0, 4, 20)  # 20 req/s at 10 ms in every 1 s window
    (row,) = step_results(_one_step(RULE), steady, "grpc")
    assert row.stable is True and row.requests == 80
    uneven = _steady(1000.0, 4, 20)
    uneven["ok"][60:75] = False  # the last window: 5 successes instead of 20
    (row,) = step_results(_one_step(RULE), uneven, "grpc")
    assert row.stable is False and row.failures == 15
    slow = _steady(1000.0, 4, 20)
    slow["ms"][40:] = 30.0  # p99 triples in the last two windows
    assert step_results(_one_step(RULE), slow, "grpc")[0].stable is False
    assert step_results(_one_step({**RULE, "window_s": 0.0}), steady, "grpc")[0].stable is None
    assert step_results(_one_step({}), steady, "grpc")[0].stable is None
    assert step_results(_one_step(None), steady, "grpc")[0].stable is None


def test_a_step_without_a_window_does_not_end_the_summary() -> None:
    meta = {
        "models": ["m"],
        "steps": [
            {"users": 1, "measure_start": None, "end": 999.0},
            {"users": 3, "measure_start": 1000.0, "end": 1004.0},
        ],
    }
    (row,) = step_results(meta, _steady(1000.0, 4, 5), "http")
    assert row.users == 3 and row.requests == 20 and row.platform == ""


def test_server_times_need_both_snapshots() -> None:
    start = {"m": _counters()}
    end = {"m": _counters(success_count=4, queue_ns=4_000_000)}
    arrays = _steady(1000.0, 4, 5)
    assert step_results(_one_step(None, stats_start=start), arrays, "h")[0].server == ()
    assert step_results(_one_step(None, stats_end=end), arrays, "h")[0].server == ()
    both = _one_step(None, stats_start=start, stats_end=end)
    assert step_results(both, arrays, "h")[0].server == (ServerTime("m", 4, 1.0, 0.0),)


def test_resolution_of_too_few_distinct_samples_is_infinite() -> None:
    from triton_kit.loadtest.reports.summary import resolution_ms

    assert resolution_ms(np.array([])) == math.inf
    assert resolution_ms(np.array([2.5])) == math.inf
    assert resolution_ms(np.array([2.5, 2.5])) == math.inf
    assert resolution_ms(np.array([2.5, 2.5, 2.75, 3.5])) == 0.25
