"""A real Prometheus scraping a real Triton and a real Locust, and the Grafana dashboard
checked against them.

The server is the embedded tritonserver (the 24.10 core) serving tiny python models made
here (one of them behind an ensemble), so these tests depend only on the deployment files,
not on the built models. A headless Locust master drives the ensemble with the kit's
BertUser and serves its client-side view (``--prometheus-port``). Prometheus runs with
deploy/prometheus/prometheus.yml, its `triton` and `locust` targets pointed at both.

This machine has no GPU, so Triton exports no nv_gpu_* family. Dashboard metrics in
GPU_METRICS are exempted from the live-scrape check, each with a visible skip, and must be
names that Triton documents for GPUs; every other dashboard metric must be in the scrape.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.doubler import DOUBLER_MODEL, doubler_config
from tests.support.prerequisites import PROJECT_ROOT, require_tool
from triton_kit.server import ServerConfig, TritonServer, free_port

ROOT = PROJECT_ROOT
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "triton.json"
MODEL = "tiny"
REQUESTS = 5

# Triton's per-GPU metrics (docs/user_guide/metrics.md, "GPU Metrics"), exported only where
# NVML sees a GPU. Labelled by gpu_uuid.
GPU_METRICS = frozenset(
    {
        "nv_gpu_utilization",
        "nv_gpu_memory_total_bytes",
        "nv_gpu_memory_used_bytes",
        "nv_gpu_power_usage",
        "nv_gpu_power_limit",
        "nv_energy_consumption",
    }
)
_METRIC_NAME = re.compile(r"\bnv_[a-z0-9_]+\b")

TINY_CONFIG = doubler_config(MODEL)
TINY_MODEL = DOUBLER_MODEL


# Text in, a constant 4-float embedding out (BertUser's contract), behind a one-step ensemble:
# the ensemble is the entry model, `echo` its composing model.
ECHO_CONFIG = """
name: "echo"
backend: "python"
max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "EMBEDDING" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
ECHO_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            vector = np.full((text.shape[0], 4), 0.5, dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("EMBEDDING", vector)]))
        return responses
"""
ENSEMBLE = "echo_ensemble"
ENSEMBLE_CONFIG = f"""
name: "{ENSEMBLE}"
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "EMBEDDING" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{
  step [ {{
    model_name: "echo"
    model_version: -1
    input_map {{ key: "TEXT" value: "TEXT" }}
    output_map {{ key: "EMBEDDING" value: "EMBEDDING" }}
  }} ]
}}
"""
ENTRY = f"{ENSEMBLE}|{MODEL}"  # the dashboard's $entry for this repository
SUMMARY_FAMILIES = (
    "nv_inference_request_summary_us",
    "nv_inference_queue_summary_us",
    "nv_inference_compute_infer_summary_us",
)


def write_model(repository: Path, name: str, config: str, model: str | None) -> None:
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(config)
    if model is not None:
        (repository / name / "1" / "model.py").write_text(model)


def dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def dashboard_metrics() -> list[str]:
    return sorted({m for q in dashboard_queries() for m in _METRIC_NAME.findall(q)})


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def infer(http_url: str, values: list[float]) -> list[float]:
    """One request over Triton's HTTP/REST JSON protocol (KServe v2)."""
    body = {"inputs": [{"name": "X", "shape": [1, 4], "datatype": "FP32", "data": values}]}
    request = urllib.request.Request(
        f"{http_url}/v2/models/{MODEL}/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["outputs"][0]["data"]
    except urllib.error.HTTPError as exc:
        pytest.fail(f"inference failed: HTTP {exc.code}: {exc.read().decode(errors='replace')}")


def wait_for(condition: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.5)


# -- fixtures: a real Triton with traffic, a real Prometheus scraping it -----------------------


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repository = tmp_path_factory.mktemp("repository")
    write_model(repository, MODEL, TINY_CONFIG, TINY_MODEL)
    write_model(repository, "echo", ECHO_CONFIG, ECHO_MODEL)
    write_model(repository, ENSEMBLE, ENSEMBLE_CONFIG, None)
    config = ServerConfig(
        model_repository=repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=repository.parent / "tritonserver.log",
        extra_args=["--metrics-interval-ms=500"],
        latency_summaries=True,  # what the dashboard's quantile panels read
    )
    with TritonServer(config) as server:
        for _ in range(REQUESTS):
            outputs = infer(server.http_url, [1.0, 2.0, 3.0, 4.0])
            assert outputs == [2.0, 4.0, 6.0, 8.0]
        yield server


@pytest.fixture(scope="module")
def locust_master(
    metrics_server: TritonServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A headless Locust run on the ensemble, its exporter on a free port; stopped at the end."""
    workdir = tmp_path_factory.mktemp("locust")
    port = free_port()
    command = [
        sys.executable, "-m", "locust", "-f", str(ROOT / "triton_kit/loadtest/locustfile.py"),
        "--headless", "--users", "2", "--spawn-rate", "2", "--run-time", "10m",
        "--host", metrics_server.grpc_url, "--model-name", f"bert={ENSEMBLE}",
        "--prometheus-port", str(port), "--prometheus-host", "127.0.0.1",
        "--only-summary", "BertUser",
    ]  # fmt: skip
    log = (workdir / "locust.log").open("wb")
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        # SIGTERM, as compose/k8s stop it: gevent's handler quits the runner from the hub.
        # (SIGINT was seen ignored in CI under load, 2026-11-23: the KeyboardInterrupt landed
        # inside a user's blocking gRPC call and killed only that greenlet; issue 13.)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"Locust ignored SIGTERM:\n{(workdir / 'locust.log').read_text()}")
        log.close()


def prometheus_config_for(metrics_url: str, listen: str, locust: str) -> dict[str, Any]:
    """The deployment's config with the compose service names replaced by local addresses."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    config["global"]["scrape_interval"] = "1s"
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    parsed = urllib.parse.urlsplit(metrics_url)
    assert jobs["triton"]["static_configs"] == [{"targets": ["triton:8002"]}]
    assert jobs["triton"].get("metrics_path", "/metrics") == parsed.path
    jobs["triton"]["static_configs"] = [{"targets": [parsed.netloc]}]
    assert jobs["locust"]["static_configs"] == [{"targets": ["locust-master:9646"]}]
    jobs["locust"]["static_configs"] = [{"targets": [locust]}]
    jobs["prometheus"]["static_configs"] = [{"targets": [listen]}]
    return config


@pytest.fixture(scope="module")
def prometheus(
    metrics_server: TritonServer, locust_master: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    binary = require_tool("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    listen = f"127.0.0.1:{free_port()}"
    config_file = workdir / "prometheus.yml"
    config_file.write_text(
        yaml.safe_dump(prometheus_config_for(metrics_server.metrics_url, listen, locust_master))
    )
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={listen}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://{listen}"
    try:

        def ready() -> bool:
            if process.poll() is not None:
                pytest.fail(f"prometheus exited:\n{(workdir / 'prometheus.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_for(ready, 60, "prometheus /-/ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def query(prometheus_url: str, promql: str) -> list[dict[str, Any]]:
    answer = get_json(f"{prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


# -- tests -------------------------------------------------------------------------------------


def test_prometheus_config_passes_promtool() -> None:
    promtool = require_tool("promtool")
    result = subprocess.run(
        [promtool, "check", "config", str(PROMETHEUS_CONFIG)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_prometheus_scrapes_nv_inference_count(prometheus: str) -> None:
    def counted() -> list[dict[str, Any]]:
        return [
            sample
            for sample in query(prometheus, "nv_inference_count")
            if sample["metric"].get("model") == MODEL and float(sample["value"][1]) >= REQUESTS
        ]

    samples = wait_for(counted, 60, f"nv_inference_count{{model={MODEL!r}}} >= {REQUESTS}")
    assert samples[0]["metric"]["job"] == "triton"
    targets = get_json(f"{prometheus}/api/v1/targets")["data"]["activeTargets"]
    assert {t["labels"]["job"]: t["health"] for t in targets}["triton"] == "up"


@pytest.fixture(scope="module")
def live_metric_names(metrics_server: TritonServer) -> set[str]:
    with urllib.request.urlopen(metrics_server.metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_dashboard_gpu_metrics_are_documented_triton_names() -> None:
    gpu_like = {m for m in dashboard_metrics() if m.startswith(("nv_gpu_", "nv_energy_"))}
    assert gpu_like, "the dashboard should chart GPU utilisation and memory"
    assert {"nv_gpu_utilization", "nv_gpu_memory_used_bytes"} <= gpu_like
    assert gpu_like <= GPU_METRICS, f"not Triton GPU metrics: {sorted(gpu_like - GPU_METRICS)}"


@pytest.mark.slow
@pytest.mark.parametrize("metric", dashboard_metrics())
def test_dashboard_metric_is_in_a_live_scrape(metric: str, live_metric_names: set[str]) -> None:
    if metric in GPU_METRICS and metric not in live_metric_names:
        if any(name.startswith("nv_gpu_") for name in live_metric_names):
            pytest.fail(f"{metric} missing although this server exports GPU metrics")
        pytest.skip(f"{metric}: GPU-only Triton metric; no GPU on this machine, so not exported")
    assert metric in live_metric_names, f"{metric} is not exported by Triton 2.51"


@pytest.mark.slow
@pytest.mark.parametrize("promql", dashboard_queries())
def test_dashboard_query_runs_on_prometheus(
    promql: str, prometheus: str, live_metric_names: set[str]
) -> None:
    """Each panel query is valid PromQL and returns series (GPU ones only where a GPU is)."""
    concrete = promql.replace("$__rate_interval", "30s").replace("$model", ".*")
    concrete = concrete.replace("$entry", ENTRY)
    gpu_exported = any(name.startswith("nv_gpu_") for name in live_metric_names)
    if set(_METRIC_NAME.findall(promql)) & GPU_METRICS and not gpu_exported:
        query(prometheus, concrete)  # valid PromQL; necessarily empty without a GPU
        return
    wait_for(lambda: query(prometheus, concrete), 30, f"a result for {concrete}")


def values(prometheus_url: str, promql: str) -> dict[str, float]:
    return {
        json.dumps(sample["metric"], sort_keys=True): float(sample["value"][1])
        for sample in query(prometheus_url, promql)
    }


@pytest.mark.slow
@pytest.mark.parametrize("family", SUMMARY_FAMILIES)
def test_summary_latency_quantiles_are_scraped_after_traffic(family: str, prometheus: str) -> None:
    """With ``latency_summaries`` the launcher turns Triton's summaries on; each quantile the
    dashboard reads exists."""
    promql = f'{family}{{model="echo"}}'
    samples = wait_for(lambda: query(prometheus, promql), 60, promql)
    quantiles = {s["metric"]["quantile"] for s in samples}
    assert {"0.5", "0.99"} <= quantiles, quantiles
    p99 = wait_for(
        lambda: [v for v in values(prometheus, f'{promql[:-1]}, quantile="0.99"}}').values()
                 if v == v and v > 0],  # NaN until the window holds a request
        30, f"a measured p99 of {family}",
    )  # fmt: skip
    assert p99[0] < 10e6, f"{family} p99 of {p99[0]} us for a constant python model"
    count = values(prometheus, f'{family}_count{{model="echo"}}')
    assert max(count.values()) >= 1


@pytest.mark.slow
def test_entry_and_composing_request_rates_are_apart(prometheus: str) -> None:
    """Through an ensemble each request is counted twice; the dashboard splits the two."""
    panels = {p["title"]: p for p in json.loads(DASHBOARD.read_text())["panels"]}
    entry = panels["Request rate (successful), entry models"]["targets"][0]["expr"]
    composing = panels["Request rate (successful), composing models"]["targets"][0]["expr"]

    def models(promql: str) -> set[str]:
        concrete = promql.replace("$__rate_interval", "30s").replace("$model", ".*")
        return {s["metric"]["model"] for s in query(prometheus, concrete.replace("$entry", ENTRY))}

    assert wait_for(lambda: ENSEMBLE in models(entry), 60, "the ensemble's rate")
    assert "echo" not in models(entry)
    assert models(composing) == {"echo"}


@pytest.mark.slow
def test_locust_exporter_series_are_scraped(prometheus: str) -> None:
    """Locust's client-side counters agree with what Triton counted for the same model."""
    label = f'{{model="{ENSEMBLE}", method="grpc"}}'
    wait_for(lambda: query(prometheus, f"locust_requests_total{label} > 20"), 60, "Locust requests")
    wait_for(
        lambda: query(prometheus, 'locust_response_time_seconds{quantile="0.99"}'), 30, "a p99"
    )
    assert list(values(prometheus, "locust_users").values()) == [2.0]
    assert max(values(prometheus, f"locust_failures_total{label}").values()) == 0
    both = (
        f"sum(locust_requests_total{label})",
        f'sum(nv_inference_request_success{{model="{ENSEMBLE}"}})',
    )
    client, server = (next(iter(values(prometheus, promql).values())) for promql in both)
    # Scraped at different instants (Triton refreshes every 0.5 s): close, not equal.
    assert abs(client - server) <= 0.2 * server + 50, (client, server)


def test_entry_variable_names_the_shipped_entry_models() -> None:
    """$entry's default is what server.drain calls entry models in model_repository/."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    from triton_kit.server.drain import entry_models

    configs = {
        path.parent.name: json_format.MessageToDict(
            text_format.Parse(path.read_text(), model_config_pb2.ModelConfig()),
            preserving_proto_field_name=True,
        )
        for path in (ROOT / "model_repository").glob("*/config.pbtxt")
    }
    if not configs:
        pytest.skip("model_repository/ not built")
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    (entry,) = [v for v in variables if v["name"] == "entry"]
    assert sorted(entry["query"].split("|")) == entry_models(configs)
    assert entry["current"]["value"] == entry["query"]
