"""Model Analyzer's profile YAML for one model, pointed at the kit's embedded server.

``triton_launch_mode: local`` with the tritonserver, backend directory and environment the
kit's own launcher uses (:class:`~loadtest.tune.environment.EmbeddedServer`, from
:mod:`triton_kit.server.binary`), the kit's perf_analyzer, free ports, a
brute search over the model's :class:`~loadtest.tune.space.SearchSpace`, and checkpoints in
the run's folder so the same command resumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from triton_kit.loadtest.tune.environment import EmbeddedServer
from triton_kit.loadtest.tune.space import SearchSpace
from triton_kit.server.launcher import free_ports

CSV_NAME = "metrics-model-inference.csv"
# Model Analyzer records no p50; avg and p90 sit beside p99.
INFERENCE_FIELDS = [
    "model_name",
    "batch_size",
    "concurrency",
    "model_config_path",
    "instance_group",
    "max_batch_size",
    "satisfies_constraints",
    "perf_throughput",
    "perf_latency_avg",
    "perf_latency_p90",
    "perf_latency_p99",
]
_SERVER_ENV = ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH")


@dataclass(frozen=True)
class ModelRun:
    """Where one model's profile lives inside the run's folder."""

    folder: Path

    @property
    def yaml(self) -> Path:
        return self.folder / "model-analyzer.yaml"

    @property
    def variants(self) -> Path:
        return self.folder / "variants"

    @property
    def export(self) -> Path:
        return self.folder / "model-analyzer"

    @property
    def csv(self) -> Path:
        return self.export / "results" / CSV_NAME

    @property
    def log(self) -> Path:
        return self.folder / "model-analyzer.log"


@dataclass(frozen=True)
class Measurement:
    """perf_analyzer's settings for every measurement."""

    window_ms: int
    stability_percent: int
    input_data: Path | None = None


def profile_config(
    repository: Path,
    server: EmbeddedServer,
    space: SearchSpace,
    run: ModelRun,
    perf_analyzer: Path,
    measurement: Measurement,
    slo_p99_ms: float,
    min_throughput: float = 0.0,
) -> dict:
    """The YAML as a dict; the constraints mirror the SLO and --min-throughput so Model
    Analyzer's own reports mark the same configs as the kit's summary does."""
    http, grpc, metrics = _ports(run)
    pa_flags = {
        "measurement-mode": "time_windows",
        "measurement-interval": str(measurement.window_ms),
        "stability-percentage": str(measurement.stability_percent),
        "max-trials": "10",
    }
    if measurement.input_data is not None:
        pa_flags["input-data"] = str(measurement.input_data)
    return {
        "model_repository": str(Path(repository).resolve()),
        "output_model_repository_path": str(run.variants),
        "override_output_model_repository": True,
        "export_path": str(run.export),
        "checkpoint_directory": str(run.folder / "checkpoints"),
        "triton_launch_mode": "local",
        "triton_server_path": str(server.binary),
        "triton_server_flags": {"backend-directory": str(server.backends)},
        "triton_server_environment": {k: server.env[k] for k in _SERVER_ENV if server.env.get(k)},
        "triton_output_path": str(run.folder / "tritonserver.log"),
        "triton_http_endpoint": f"localhost:{http}",
        "triton_grpc_endpoint": f"localhost:{grpc}",
        "triton_metrics_url": f"http://localhost:{metrics}/metrics",
        "perf_analyzer_path": str(perf_analyzer),
        "perf_output": True,
        "perf_output_path": str(run.folder / "perf_analyzer.log"),
        "run_config_search_mode": "brute",
        "run_config_search_disable": True,
        "concurrency": list(space.concurrency),
        "perf_analyzer_flags": pa_flags,
        "inference_output_fields": INFERENCE_FIELDS,
        "num_configs_per_model": space.variant_count + 1,
        "profile_models": {
            space.model: {
                "cpu_only": space.kind == "KIND_CPU",
                "model_config_parameters": space.model_config_parameters(),
            }
        },
        "constraints": constraints(slo_p99_ms, min_throughput),
    }


def constraints(slo_p99_ms: float, min_throughput: float) -> dict:
    """Model Analyzer's global ``constraints``; 0 throughput means no floor, as in the CLI."""
    limits: dict = {"perf_latency_p99": {"max": max(1, round(slo_p99_ms))}}
    if min_throughput:
        limits["perf_throughput"] = {"min": min_throughput}
    return limits


def _ports(run: ModelRun) -> tuple[int, int, int]:
    """Free ports, or the ones an earlier run in this folder used: Model Analyzer's checkpoint
    keys measurements by perf_analyzer's flags, metrics URL included, so a resumed run must
    keep them to reuse what was measured."""
    if run.yaml.is_file():
        earlier = yaml.safe_load(run.yaml.read_text())
        return (
            int(earlier["triton_http_endpoint"].rsplit(":", 1)[1]),
            int(earlier["triton_grpc_endpoint"].rsplit(":", 1)[1]),
            int(earlier["triton_metrics_url"].rsplit(":", 1)[1].split("/")[0]),
        )
    http, grpc, metrics = free_ports(3)
    return http, grpc, metrics


def write(config: dict, run: ModelRun) -> Path:
    run.folder.mkdir(parents=True, exist_ok=True)
    run.yaml.write_text(yaml.safe_dump(config, sort_keys=False))
    return run.yaml
