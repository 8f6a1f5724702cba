"""The Model Analyzer YAML the tune command writes: its constraints and instance kinds."""

from __future__ import annotations

from pathlib import Path

from triton_kit.loadtest.tune import config, space
from triton_kit.loadtest.tune.environment import EmbeddedServer


def _yaml(tmp_path: Path, search: space.SearchSpace, min_throughput: float) -> dict:
    server = EmbeddedServer(tmp_path / "tritonserver", tmp_path / "backends", {})
    return config.profile_config(
        tmp_path / "repo",
        server,
        search,
        config.ModelRun(tmp_path / "run"),
        tmp_path / "perf_analyzer",
        config.Measurement(1000, 10),
        slo_p99_ms=50,
        min_throughput=min_throughput,
    )


def test_min_throughput_reaches_model_analyzer(tmp_path: Path) -> None:
    search = space.SearchSpace("m", "KIND_CPU", (1,))
    body = _yaml(tmp_path, search, min_throughput=120)
    assert body["constraints"] == {
        "perf_latency_p99": {"max": 50},
        "perf_throughput": {"min": 120},
    }


def test_no_min_throughput_means_no_throughput_constraint(tmp_path: Path) -> None:
    body = _yaml(tmp_path, space.SearchSpace("m", "KIND_CPU", (1,)), min_throughput=0)
    assert "perf_throughput" not in body["constraints"]


def test_cpu_only_follows_the_kind(tmp_path: Path) -> None:
    cpu = _yaml(tmp_path, space.SearchSpace("m", "KIND_CPU", (1,)), 0)
    gpu = _yaml(tmp_path / "g", space.SearchSpace("m", "KIND_GPU", (1,)), 0)
    assert cpu["profile_models"]["m"]["cpu_only"] is True
    assert gpu["profile_models"]["m"]["cpu_only"] is False
