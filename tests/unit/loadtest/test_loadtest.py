"""The load-test pieces that need no server: resolution, weights, corpora, summary, SLOs."""

from __future__ import annotations

import io
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.loadtest import corpora
from triton_kit.loadtest.options import Weights, parse_pairs, parse_steps
from triton_kit.loadtest.reports.slo import Slo
from triton_kit.loadtest.reports.summary import StepResult, resolution_ms, step_results
from triton_kit.loadtest.triton_stats import ModelCounters, parse_model_stats, window

ROOT = PROJECT_ROOT


def _in_locust_process(code: str) -> None:
    """Importing locust monkey-patches the interpreter with gevent: keep it out of pytest's."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_resolution_patch_reaches_locust_stats_and_csv() -> None:
    _in_locust_process(
        """
        import locust.stats
        from triton_kit.loadtest.reports.resolution import fine_bucket, install
        assert fine_bucket(0.43) == 0.4 and fine_bucket(0.47) == 0.5
        assert fine_bucket(1.24) != fine_bucket(1.26) and fine_bucket(99.94) == 99.9
        assert fine_bucket(151.4) == 151 and fine_bucket(4321.0) == 4320
        install()
        entry = locust.stats.StatsEntry(locust.stats.RequestStats(), "m", "grpc")
        for value in (0.41, 0.42, 0.63, 0.64, 0.65):
            entry.log(value, 0)
        assert abs(entry.get_response_time_percentile(0.5) - 0.6) < 1e-9
        assert abs(entry.get_response_time_percentile(0.2) - 0.4) < 1e-9
        assert " 0.6 " in entry.percentile(), entry.percentile()
        csv = locust.stats.StatsCSV.__new__(locust.stats.StatsCSV)
        csv.percentiles_to_report = [0.2, 0.5]
        assert csv._percentile_fields(entry) == [0.4, 0.6]
        """
    )


def test_weights_parse_users_and_tasks() -> None:
    weights = Weights.parse("resnet50=2, bert=1,nmt.beam=0,resnet50.large=3")
    assert weights.users == {"resnet50": 2, "bert": 1}
    assert weights.tasks == {("nmt", "beam"): 0, ("resnet50", "large"): 3}
    for bad in ("resnet50", "bert=x", "nmt=0"):
        with pytest.raises(ValueError):
            Weights.parse(bad)


def test_task_weights_rebuild_the_task_list() -> None:
    _in_locust_process(
        """
        import pytest
        from triton_kit.loadtest import users
        from triton_kit.loadtest.options import Weights
        from triton_kit.loadtest.weights import apply_weights

        class Probe(users.ResNet50User):
            abstract = True

        weights = Weights.parse("resnet50=3,resnet50.small=0,resnet50.large=2")
        apply_weights(weights, {"resnet50": Probe})
        assert [t.__name__ for t in Probe.tasks] == ["large", "large"], Probe.tasks
        assert Probe.weight == 3
        with pytest.raises(ValueError, match="without any task"):
            none = Weights.parse("resnet50.small=0,resnet50.large=0")
            apply_weights(none, {"resnet50": Probe})
        with pytest.raises(ValueError, match="unknown task"):
            apply_weights(Weights.parse("resnet50.huge=1"), {"resnet50": Probe})
        """
    )


def test_pairs_and_steps() -> None:
    assert parse_pairs(["bert=identity"]) == {"bert": "identity"}
    assert parse_steps("1, 2,8") == [1, 2, 8]
    with pytest.raises(ValueError):
        parse_steps("0,2")
    with pytest.raises(ValueError):
        parse_pairs(["bert"])


def test_images_vary_in_size_and_format_and_decode() -> None:
    samples = corpora.images(9, corpora.SMALL_SIDES, seed=3)
    assert {s.fmt for s in samples} == {"JPEG", "PNG", "WEBP"}
    assert len({(s.width, s.height) for s in samples}) > 3
    assert len({len(s.data) for s in samples}) == len(samples)
    for sample in samples:
        image = Image.open(io.BytesIO(sample.data))
        assert image.format == sample.fmt
        assert image.size == (sample.width, sample.height)


def test_texts_vary_in_length_and_carry_numbers() -> None:
    texts = corpora.sentences(100, seed=1)
    lengths = [len(t.split()) for t in texts]
    assert min(lengths) <= 8 and max(lengths) >= 25
    assert len(set(texts)) > 90
    phrases = corpora.number_phrases(50, seed=1)
    assert all(any(ch.isdigit() for ch in p) or "hundred" in p or "-" in p for p in phrases)
    assert corpora.spelled(342) == "three hundred and forty-two"
    assert corpora.spelled(17) == "seventeen"


def test_grpc_statistics_json_with_string_counters() -> None:
    payload = {
        "model_stats": [
            {
                "name": "resnet50",
                "version": "1",
                "execution_count": "10",
                "inference_stats": {
                    "success": {"count": "10", "ns": "5000000"},
                    "queue": {"count": "10", "ns": "2000000"},
                    "compute_infer": {"count": "10", "ns": "3000000"},
                },
            }
        ]
    }
    stats = parse_model_stats(payload)["resnet50"]
    assert stats.success_count == 10 and stats.queue_ns == 2_000_000
    assert stats.compute_infer_ns == 3_000_000 and stats.compute_input_ns == 0


def _counters(count: int, queue_ms: float, compute_ms: float) -> dict:
    return {
        "success_count": count,
        "success_ns": 0,
        "fail_count": 0,
        "queue_ns": int(queue_ms * 1e6 * count),
        "compute_input_ns": 0,
        "compute_infer_ns": int(compute_ms * 1e6 * count),
        "compute_output_ns": 0,
        "execution_count": count,
    }


def test_step_results_use_only_the_measured_window() -> None:
    meta = {
        "models": ["resnet50"],
        "steps": [
            {
                "index": 0,
                "users": 2,
                "start": 100.0,
                "measure_start": 102.0,
                "end": 104.0,
                "stats_start": {"resnet50": _counters(0, 0, 0), "other": _counters(5, 1, 1)},
                "stats_end": {"resnet50": _counters(4, 0.5, 2.0), "other": _counters(5, 1, 1)},
            }
        ],
    }
    arrays = {
        "t": np.array([101.0, 102.5, 103.0, 103.5, 103.9, 104.5]),
        "ms": np.array([999.0, 1.0, 2.0, 3.0, 4.0, 999.0]),
        "model": np.zeros(6, dtype=np.uint16),
        "ok": np.array([True, True, True, True, False, True]),
    }
    (result,) = step_results(meta, arrays, "grpc")
    assert (result.requests, result.failures) == (4, 1)
    assert result.error_ratio == pytest.approx(0.25)
    # Successful in-window samples are 1, 2, 3 ms: linear-interpolated percentiles, exactly.
    percentiles = (result.p50_ms, result.p90_ms, result.p95_ms, result.p99_ms)
    assert percentiles == pytest.approx((2.0, 2.8, 2.9, 2.98), abs=1e-9)
    assert result.throughput_rps == pytest.approx(1.5)
    (server,) = result.server  # "other" served nothing in the window
    assert server.model == "resnet50"
    assert server.queue_ms == pytest.approx(0.5) and server.compute_ms == pytest.approx(2.0)


def test_queue_and_compute_of_ensembles_and_bls_models() -> None:
    from triton_kit.loadtest.reports.summary import ServerTime

    parts = (
        ServerTime("bert", 10, 0.0, 29.0),  # an ensemble: no queue, its steps' compute summed
        ServerTime("bert_model", 10, 20.0, 25.0),
        ServerTime("bert_preprocess", 10, 1.0, 4.0),
    )
    result = StepResult("http", "bert", 1, 5.0, 10, 0, 1, 2, 3, 4, 2.0, parts, platform="ensemble")
    assert result.server_split_ms == pytest.approx((21.0, 29.0))
    bls = (ServerTime("nmt", 4, 2.0, 100.0), ServerTime("nmt_decoder", 40, 0.5, 2.0))
    result = StepResult("http", "nmt", 1, 5.0, 4, 0, 1, 2, 3, 4, 0.8, bls, platform="python")
    assert result.server_split_ms == pytest.approx((7.0, 95.0))  # decoder waits were in compute


def test_window_keeps_only_models_that_served() -> None:
    before = {"a": ModelCounters(success_count=3), "b": ModelCounters(success_count=1)}
    after = {"a": ModelCounters(success_count=7), "b": ModelCounters(success_count=1)}
    assert window(before, after) == {"a": ModelCounters(success_count=4)}


def test_resolution_of_samples() -> None:
    assert resolution_ms(np.array([0.51, 0.53, 0.53, 0.9])) == pytest.approx(0.02)


def _result(p99: float, requests: int = 100, failures: int = 0) -> StepResult:
    return StepResult("grpc", "bert", 4, 5.0, requests, failures, 1, 2, 3, p99, 20.0, ())


def test_slo_breaches_name_protocol_model_step_and_value() -> None:
    slo = Slo(p99_ms=10, error_ratio=0.01)
    assert slo.breaches([_result(9.5)]) == []
    (breach,) = slo.breaches([_result(12.25)])
    assert breach == "grpc bert at 4 users: p99 12.25 ms > 10 ms"
    (breach,) = slo.breaches([_result(5, failures=2)])
    assert "error ratio 0.0200 > 0.01 (2 of 100 failed)" in breach
    assert "no request completed" in slo.breaches([_result(math.nan, requests=0)])[0]


def test_percentiles_of_a_known_distribution() -> None:
    """1..1000 ms in shuffled order: the k-th percentile is k*9.99 + 1 (linear interpolation)."""
    values = np.random.default_rng(5).permutation(np.arange(1.0, 1001.0))
    meta = {
        "models": ["bert"],
        "steps": [
            {
                "index": 0,
                "users": 1,
                "start": 0.0,
                "measure_start": 0.0,
                "end": 10.0,
                "stats_start": {},
                "stats_end": {},
            }
        ],
    }
    arrays = {
        "t": np.linspace(0.5, 9.5, values.size),
        "ms": values,
        "model": np.zeros(values.size, dtype=np.uint16),
        "ok": np.ones(values.size, dtype=bool),
    }
    (result,) = step_results(meta, arrays, "http")
    got = (result.p50_ms, result.p90_ms, result.p95_ms, result.p99_ms)
    assert got == pytest.approx((500.5, 900.1, 950.05, 990.01), abs=1e-6)
    assert result.requests == 1000 and result.failures == 0
    assert result.throughput_rps == pytest.approx(100.0)


def test_server_time_per_request_sums_the_compute_parts() -> None:
    from triton_kit.loadtest.reports.summary import ServerTime
    from triton_kit.loadtest.triton_stats import ModelCounters

    delta = ModelCounters(
        success_count=4,
        queue_ns=8_000_000,
        compute_input_ns=1_000_000,
        compute_infer_ns=6_000_000,
        compute_output_ns=1_000_000,
    )
    time = ServerTime.of("bert", delta)
    assert (time.model, time.requests) == ("bert", 4)
    assert time.queue_ms == pytest.approx(2.0, rel=1e-9)
    assert time.compute_ms == pytest.approx(2.0, rel=1e-9)
    one = ServerTime.of("bert", ModelCounters(success_count=1, queue_ns=3_000_000))
    assert one.queue_ms == pytest.approx(3.0, rel=1e-9)


def test_window_length_platform_and_empty_window() -> None:
    meta = {
        "models": ["bert"],
        "platforms": {"bert": "ensemble"},
        "steps": [
            {
                "index": 0,
                "users": 1,
                "start": 10.0,
                "measure_start": 12.0,
                "end": 15.0,
                "stats_start": {},
                "stats_end": {},
            }
        ],
    }
    arrays = {
        "t": np.array([20.0]),  # nothing completed inside the window
        "ms": np.array([1.0]),
        "model": np.zeros(1, dtype=np.uint16),
        "ok": np.array([True]),
    }
    (result,) = step_results(meta, arrays, "grpc")
    assert result.window_s == pytest.approx(3.0)
    assert result.platform == "ensemble"
    assert result.requests == 0
    assert all(np.isnan(v) for v in (result.p50_ms, result.p90_ms, result.p95_ms, result.p99_ms))
