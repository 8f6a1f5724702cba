"""The Model Analyzer YAML the tune command writes: its constraints and instance kinds."""

from __future__ import annotations

from pathlib import Path

from triton_kit.build_engines.repository import (
    Tensor,
    onnx_model_config,
    python_model_config,
    set_instances,
)
from triton_kit.loadtest.tune import config, options, space
from triton_kit.loadtest.tune.environment import EmbeddedServer

TEXT = Tensor("TEXT", "STRING", (1,))
VECTOR = Tensor("EMBEDDING", "FP32", (4,))


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


def _opts() -> options.TuneOptions:
    return options.TuneOptions(slo_p99_ms=100)


def test_on_a_gpu_host_a_python_model_stays_on_cpu() -> None:
    tokenizer = python_model_config("tokenizer", [TEXT], [VECTOR], 16)
    search = space.derive(tokenizer, _opts(), cores=2, gpu=True)
    assert search.kind == "KIND_CPU"
    assert search.model_config_parameters()["instance_group"][0]["kind"] == "KIND_CPU"


def test_on_a_gpu_host_the_ctranslate2_text_model_stays_on_cpu() -> None:
    """The default nmt: the kit's ctranslate2 backend, built for the CPU only."""
    nmt = python_model_config("nmt", [TEXT], [TEXT], 32)
    nmt.backend = "ctranslate2"
    assert space.derive(nmt, _opts(), cores=2, gpu=True).kind == "KIND_CPU"


def test_on_a_gpu_host_an_engine_model_gets_gpu_instances() -> None:
    engine = onnx_model_config("engine", [VECTOR], [VECTOR], 16)
    search = space.derive(engine, _opts(), cores=2, gpu=True)
    assert search.kind == "KIND_GPU"


def test_a_python_model_configured_for_gpu_keeps_gpu_instances() -> None:
    model = python_model_config("gpu_python", [TEXT], [VECTOR], 16)
    set_instances(model, 1, "KIND_GPU")
    assert space.derive(model, _opts(), cores=2, gpu=True).kind == "KIND_GPU"


def test_without_a_gpu_every_model_is_on_cpu() -> None:
    engine = onnx_model_config("engine", [VECTOR], [VECTOR], 16)
    del engine.instance_group[:]
    assert space.derive(engine, _opts(), cores=2, gpu=False).kind == "KIND_CPU"


def test_cpu_only_follows_the_kind(tmp_path: Path) -> None:
    cpu = _yaml(tmp_path, space.SearchSpace("m", "KIND_CPU", (1,)), 0)
    gpu = _yaml(tmp_path / "g", space.SearchSpace("m", "KIND_GPU", (1,)), 0)
    assert cpu["profile_models"]["m"]["cpu_only"] is True
    assert gpu["profile_models"]["m"]["cpu_only"] is False
