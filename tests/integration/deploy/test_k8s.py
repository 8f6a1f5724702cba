"""deploy/k8s, checked for what breaks in production (no cluster runs here).

The overlays are rendered by the real `kubectl kustomize`; the Triton flags of the
Deployment run on the embedded Triton 2.51 (the 24.10 container's core), whose probes,
restricted APIs and /metrics are then exercised for real; the HPA's metric is traced through
the prometheus-adapter rule to series Triton exports; the plan check runs as the init
container would.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prerequisites import PROJECT_ROOT, require_tool
from triton_kit.server import ServerConfig, TritonServer

ROOT = PROJECT_ROOT
K8S = ROOT / "deploy/k8s"
OVERLAYS = ("gpu", "cpu")
ADMIN_KEY = "test-admin-key"
# Flags the embedded launcher sets itself (paths and loopback ports of this machine).
LAUNCHER_FLAGS = ("--model-repository", "--http-port", "--grpc-port", "--metrics-port",
                  "--http-address", "--grpc-address", "--metrics-address",
                  "--model-control-mode", "--load-model")  # fmt: skip


def _render(target: Path) -> list[dict[str, Any]]:
    kubectl = require_tool("kubectl")
    result = subprocess.run(
        [kubectl, "kustomize", str(target)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, _render(K8S / "overlays" / request.param)


def _get(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} objects"
    return found[0]


def _container(pod_spec: dict[str, Any], name: str, init: bool = False) -> dict[str, Any]:
    key = "initContainers" if init else "containers"
    return next(c for c in pod_spec.get(key, []) if c["name"] == name)


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in args if a.startswith("--") and "=" in a)


def _pod(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return _get(objects, kind, name)["spec"]["template"]["spec"]


def _triton(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _container(_pod(objects, "Deployment", "triton"), "triton")


def _front_door(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _container(_pod(objects, "Deployment", "triton"), "front-door")


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _probe_url(container: dict[str, Any], probe: str) -> urllib.parse.SplitResult:
    """The URL an exec probe checks with the serving image's wait_for_ready.py."""
    command = container[probe]["exec"]["command"]
    assert command[:2] == ["python3", "/opt/triton-kit/docker/wait_for_ready.py"], command
    assert "--timeout=0" in command, "one check per probe, not a wait"
    return urllib.parse.urlsplit(command[-1])


def _port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


def _selects(service_or_pdb_selector: dict[str, str], pod_labels: dict[str, str]) -> bool:
    return all(pod_labels.get(k) == v for k, v in service_or_pdb_selector.items())


# -- validation ------------------------------------------------------------------------------


def _load_check_module():
    spec = importlib.util.spec_from_file_location("k8s_check", K8S / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_object_validates_offline(tmp_path: Path) -> None:
    require_tool("kubectl")
    result = subprocess.run(
        [sys.executable, str(K8S / "check.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"gpu.yaml", "cpu.yaml", "kserve.yaml"}


def test_validation_rejects_a_misspelt_field_in_builtin_and_custom_kinds() -> None:
    check = _load_check_module()
    objects = _render(K8S / "overlays/gpu") + _render(K8S / "kserve")
    deployment = _get(objects, "Deployment", "triton")
    _triton([deployment])["readinessProbe"]["periodSecond"] = 5
    assert any("periodSecond" in p for p in check.problems(deployment))
    monitor = _get(objects, "PodMonitor", "triton")
    monitor["spec"]["podMetricsEndpoints"][0]["intervall"] = "10s"
    assert any("intervall" in p for p in check.problems(monitor))
    isvc = _get(objects, "InferenceService", "triton-kit")
    assert check.problems(isvc) == []
    isvc["spec"]["predictor"]["minReplica"] = 1
    assert any("minReplica" in p for p in check.problems(isvc))


# -- Triton: probes, ports, flags ------------------------------------------------------------


def test_probes_point_at_triton_health_endpoints_on_its_http_port(rendered) -> None:
    """Triton's HTTP and gRPC listen on loopback only (the front door is the way in), so
    its probes run in the container, on Triton's own port, not through the door."""
    _, objects = rendered
    triton = _triton(objects)
    flags = _flags(triton["args"])
    assert flags["--http-address"] == flags["--grpc-address"] == "127.0.0.1"
    expected = {"startupProbe": "/v2/health/ready", "readinessProbe": "/v2/health/ready"}
    expected["livenessProbe"] = "/v2/health/live"
    for probe, path in expected.items():
        url = _probe_url(triton, probe)
        assert url.path == path, probe
        assert (url.hostname, url.port) == ("127.0.0.1", int(flags["--http-port"])), probe
    ports = {p["name"]: p["containerPort"] for p in triton["ports"]}
    assert ports == {"metrics": int(flags["--metrics-port"])}
    startup = triton["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "model load time"


def test_services_reach_the_front_door_and_tritons_metrics(rendered) -> None:
    """Clients get the front door's ports; Prometheus gets Triton's metrics port."""
    _, objects = rendered
    containers = {"http": _front_door(objects), "grpc": _front_door(objects)}
    containers["metrics"] = _triton(objects)
    labels = _get(objects, "Deployment", "triton")["spec"]["template"]["metadata"]["labels"]
    expected = {"triton": {"http", "grpc"}, "triton-grpc": {"grpc"}, "triton-metrics": {"metrics"}}
    for name, port_names in expected.items():
        service = _get(objects, "Service", name)
        assert _selects(service["spec"]["selector"], labels), name
        assert {p["targetPort"] for p in service["spec"]["ports"]} == port_names
        for port in service["spec"]["ports"]:
            # raises if that container does not open the name
            _port_number(containers[port["targetPort"]], port["targetPort"])


def test_front_door_sidecar_forwards_to_tritons_loopback_ports(rendered, tmp_path: Path) -> None:
    """The sidecar renders the compose front door's own template (through a ConfigMap) with
    its environment: it listens on its named ports, forwards to Triton's loopback ports, and
    nginx accepts the result; it runs non-root on a read-only root."""
    from tests.support.nginx import configure
    from triton_kit.server import front_door

    _, objects = rendered
    pod = _pod(objects, "Deployment", "triton")
    door, flags = _front_door(objects), _flags(_triton(objects)["args"])
    image = door["image"]
    assert image.startswith("nginx:") and not image.endswith(":latest"), image
    env = _env(door)
    assert env["FRONT_HTTP_LISTEN"] == str(_port_number(door, "http"))
    assert env["FRONT_GRPC_LISTEN"] == str(_port_number(door, "grpc"))
    assert env["TRITON_HTTP_UPSTREAM"] == f"127.0.0.1:{flags['--http-port']}"
    assert env["TRITON_GRPC_UPSTREAM"] == f"127.0.0.1:{flags['--grpc-port']}"
    assert env["TRITON_KIT_MAX_REQUEST_BODY"] == front_door.DEFAULTS["TRITON_KIT_MAX_REQUEST_BODY"]
    mounts = {m["mountPath"]: m["name"] for m in door["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_map = _get(
        objects, "ConfigMap", volumes[mounts["/etc/nginx/templates"]]["configMap"]["name"]
    )
    text = config_map["data"]["default.conf.template"]
    assert text == front_door.TEMPLATE.read_text(), "the compose template, unchanged"
    configure(tmp_path / "nginx", front_door.substitute(text, env))
    for writable in ("/etc/nginx/conf.d", "/var/cache/nginx", "/var/run"):
        assert "emptyDir" in volumes[mounts[writable]], writable
    assert door["securityContext"]["readOnlyRootFilesystem"] is True
    assert door["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert _port_number(door, door["readinessProbe"]["httpGet"]["port"]) == _port_number(
        door, "http"
    )
    assert _get(objects, "Service", "triton-grpc")["spec"]["clusterIP"] == "None"


def pre_stop_drain(triton: dict[str, Any]) -> dict[str, str]:
    """The preStop hook's server.drain options; asserts the hook runs the drain module."""
    command = triton["lifecycle"]["preStop"]["exec"]["command"]
    # -S: only the stdlib and PYTHONPATH (what the serving image copies), as the test runs it.
    assert command[:4] == ["python3", "-S", "-m", "triton_kit.server.drain"], command
    return _flags(command[4:])


def test_pre_stop_drains_triton_before_the_sigterm(rendered) -> None:
    """The hook unloads the entry models on Triton's own HTTP port, which needs explicit
    model control with every model loaded, and the key the restriction flags name."""
    _, objects = rendered
    triton = _triton(objects)
    flags, drain = _flags(triton["args"]), pre_stop_drain(_triton(objects))
    url = urllib.parse.urlsplit(drain["--url"])
    assert url.hostname == "127.0.0.1" and url.port == int(flags["--http-port"])
    assert flags["--model-control-mode"] == "explicit" and flags["--load-model"] == "*"
    assert "TRITON_KIT_API_KEY" in {e["name"] for e in triton["env"]}, "the drain's key"
    assert "triton-kit-api-key=$(TRITON_KIT_API_KEY)" in flags["--http-restricted-api"]


def test_graceful_termination_outlasts_the_drain(rendered) -> None:
    """SIGKILL comes terminationGracePeriodSeconds after the hook starts: the pause, the
    drain's wait and Triton's exit timeout after the SIGTERM must all fit in it."""
    _, objects = rendered
    pod = _pod(objects, "Deployment", "triton")
    triton = _container(pod, "triton")
    exit_timeout = int(_flags(triton["args"])["--exit-timeout-secs"])
    drain = pre_stop_drain(triton)
    pause, timeout = float(drain["--pause"]), float(drain["--timeout"])
    assert pause >= 5, "endpoints need a few seconds to drop the pod"
    assert timeout >= exit_timeout, "the drain may wait as long as Triton would"
    assert pod["terminationGracePeriodSeconds"] > pause + timeout + exit_timeout


def test_triton_runs_non_root_on_a_read_only_root_with_writable_tmp_and_shm(rendered) -> None:
    _, objects = rendered
    pod = _pod(objects, "Deployment", "triton")
    triton = _container(pod, "triton")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert triton["securityContext"]["readOnlyRootFilesystem"] is True
    assert triton["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in triton["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    assert "emptyDir" in volumes[mounts["/tmp"]]
    for key in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(triton["resources"][key]), key


def test_gpu_profile_gets_gpus_on_one_gpu_type_and_cpu_profile_none(rendered) -> None:
    overlay, objects = rendered
    triton_pod = _pod(objects, "Deployment", "triton")
    job_pod = _pod(objects, "Job", "triton-model-build")
    job_args = _container(job_pod, "build-engines")["args"]
    limits = [
        c["resources"].get("limits", {})
        for pod in (triton_pod, job_pod)
        for c in pod["containers"] + pod.get("initContainers", [])
    ]
    if overlay == "cpu":
        assert all("nvidia.com/gpu" not in limit for limit in limits)
        assert "tensorrt" not in job_args
        return
    assert _container(triton_pod, "triton")["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert _container(job_pod, "build-engines")["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert job_args[job_args.index("--engine") + 1] == "tensorrt"
    # Plans only load on the GPU model that built them.
    assert triton_pod["nodeSelector"] == job_pod["nodeSelector"]
    plan_check = _container(triton_pod, "plan-check", init=True)
    assert plan_check["resources"]["limits"]["nvidia.com/gpu"] == 1


# -- KServe: the same safeguards as the Deployment --------------------------------------------


@pytest.fixture(scope="module")
def kserve() -> list[dict[str, Any]]:
    return _render(K8S / "kserve")


def _kserve_triton(objects: list[dict[str, Any]]) -> dict[str, Any]:
    runtime = _get(objects, "ServingRuntime", "triton-kit")
    return next(c for c in runtime["spec"]["containers"] if c["name"] == "kserve-container")


def test_kserve_runtime_restricts_the_admin_apis_with_the_deployments_key(kserve) -> None:
    """Unrestricted, any client could crash Triton through the shared-memory API (issue 12)."""
    triton = _kserve_triton(kserve)
    flags = _flags(triton["args"])
    for flag in ("--http-restricted-api", "--grpc-restricted-protocol"):
        groups, _, key = flags[flag].partition(":")
        assert set(groups.split(",")) == {"shared-memory", "model-repository", "logging"}, flag
        assert key == "triton-kit-api-key=$(TRITON_KIT_API_KEY)", flag
    env = {e["name"]: e for e in triton["env"]}
    assert env["TRITON_KIT_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "triton-kit-api-key",
        "key": "key",
    }
    assert env["HOME"]["value"] == "/tmp", "the python backend's stubs need a writable home"


def test_kserve_runtime_drains_before_the_sigterm(kserve) -> None:
    triton = _kserve_triton(kserve)
    flags, drain = _flags(triton["args"]), pre_stop_drain(triton)
    url = urllib.parse.urlsplit(drain["--url"])
    assert url.hostname == "127.0.0.1" and url.port == int(flags["--http-port"])
    assert flags["--model-control-mode"] == "explicit" and flags["--load-model"] == "*"
    predictor = _get(kserve, "InferenceService", "triton-kit")["spec"]["predictor"]
    pause, timeout = float(drain["--pause"]), float(drain["--timeout"])
    exit_timeout = int(flags["--exit-timeout-secs"])
    assert predictor["terminationGracePeriodSeconds"] > pause + timeout + exit_timeout


# -- the flags, on the real server -----------------------------------------------------------


def _manifest_flags_for_embedded(triton: dict[str, Any]) -> list[str]:
    args = [a.replace("$(TRITON_KIT_API_KEY)", ADMIN_KEY) for a in triton["args"]]
    assert all("$(" not in a for a in args), "every $(VAR) in args must be an env var we know"
    env = {e["name"] for e in triton["env"]}
    assert "TRITON_KIT_API_KEY" in env
    # KServe's runtime names the binary in args; the launcher starts it itself.
    return [a for a in args if a.startswith("--") and not a.startswith(LAUNCHER_FLAGS)]


def _status(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _assert_grpc_repository_api_needs_the_key(url: str) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    try:
        with pytest.raises(InferenceServerException, match="triton-kit-api-key"):
            client.get_model_repository_index()
        # Triton 2.51 prefixes the gRPC header name (docs/deploy.md says so too).
        header = "triton-grpc-protocol-triton-kit-api-key"
        client.get_model_repository_index(headers={header: ADMIN_KEY})
        assert client.is_server_ready(), "health stays open"
    finally:
        client.close()


@pytest.mark.parametrize("manifest", ["deployment", "kserve"])
def test_manifest_flags_run_on_triton_and_restrict_the_admin_apis(
    tmp_path: Path, manifest: str
) -> None:
    """Each manifest's own flags on Triton 2.51: probes answer, admin APIs need the key."""
    if manifest == "kserve":
        triton = _kserve_triton(_render(K8S / "kserve"))
    else:
        triton = _triton(_render(K8S / "overlays/cpu"))
    repository = tmp_path / "models"
    repository.mkdir()
    config = ServerConfig(
        model_repository=repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=tmp_path / "tritonserver.log",
        extra_args=_manifest_flags_for_embedded(triton),
        api_key=ADMIN_KEY,  # the key the manifest's own restriction flags name
    )
    with TritonServer(config) as server:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if manifest == "kserve":  # KServe's controller writes the predictor's probes
                break
            path = _probe_url(triton, probe).path
            assert _status(server.http_url + path) == 200, probe
        index = f"{server.http_url}/v2/repository/index"
        assert _status(index, data=b"{}") == 403
        assert _status(index, data=b"{}", headers={"triton-kit-api-key": ADMIN_KEY}) == 200
        assert _status(f"{server.http_url}/v2/models/stats") == 200, "statistics stay open"
        _assert_grpc_repository_api_needs_the_key(server.grpc_url)
        with urllib.request.urlopen(server.metrics_url, timeout=10) as response:
            assert b"# TYPE nv_" in response.read(), "--allow-metrics exports Triton's metrics"


# -- autoscaling: HPA -> adapter rule -> Triton's metrics ------------------------------------


def _adapter_rule(metric: str) -> dict[str, Any]:
    values = yaml.safe_load((K8S / "prometheus-adapter/values.yaml").read_text())
    rules = [r for r in values["rules"]["custom"] if r["name"]["as"] == metric]
    assert len(rules) == 1, f"no prometheus-adapter rule names {metric}"
    return rules[0]


def _metric_names(promql: str) -> set[str]:
    return set(re.findall(r"\b(nv_[a-z_]+)\b", promql))


def test_hpa_scales_the_deployment_on_the_adapter_rule_metric(rendered) -> None:
    _, objects = rendered
    hpa = _get(objects, "HorizontalPodAutoscaler", "triton")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "triton",
    }
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    rule = _adapter_rule(metric["pods"]["metric"]["name"])
    # The adapter maps series to pods by the labels the PodMonitor's scrape adds.
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}
    assert "podMetricsEndpoints" in _get(objects, "PodMonitor", "triton")["spec"]
    series = _metric_names(rule["seriesQuery"])
    assert re.fullmatch(rule["name"]["matches"].strip("^$"), next(iter(series)))
    assert _metric_names(rule["metricsQuery"]) == {
        "nv_inference_queue_duration_us",
        "nv_inference_request_success",
    }
    pdb = _get(objects, "PodDisruptionBudget", "triton")
    labels = _get(objects, "Deployment", "triton")["spec"]["template"]["metadata"]["labels"]
    assert _selects(pdb["spec"]["selector"]["matchLabels"], labels)
    assert hpa["spec"]["minReplicas"] >= 2, "a PDB can only let a drain through with 2+ pods"


def test_adapter_rule_metrics_are_exported_by_triton(triton_server: TritonServer) -> None:
    """Every series the rule reads is in a live /metrics of Triton 2.51, as counters."""
    from triton_kit.client import TritonClient

    with TritonClient(triton_server.http_url, timeout=60) as client:
        client.embed(["queue time"])  # one real request, so the per-model counters move
    with urllib.request.urlopen(triton_server.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    rule = _adapter_rule("triton_queue_time_per_request_us")
    for name in _metric_names(rule["metricsQuery"]) | _metric_names(rule["seriesQuery"]):
        assert f"# TYPE {name} counter" in text, f"Triton does not export {name} as a counter"
        values = [float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M)]
        assert values, name
    successes = [
        float(v) for v in re.findall(r"^nv_inference_request_success{[^}]*} (\S+)$", text, re.M)
    ]
    assert max(successes) >= 1


# -- distributed Locust ----------------------------------------------------------------------


def test_locust_workers_reach_the_master_service(rendered) -> None:
    _, objects = rendered
    worker = _container(_pod(objects, "Deployment", "locust-worker"), "locust")
    master_deployment = _get(objects, "Deployment", "locust-master")
    master = _container(master_deployment["spec"]["template"]["spec"], "locust")
    worker_flags, master_flags = _flags(worker["args"]), _flags(master["args"])
    assert "--worker" in worker["args"] and "--master" in master["args"]
    service = _get(objects, "Service", worker_flags["--master-host"])
    master_labels = master_deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(service["spec"]["selector"], master_labels)
    port = next(
        p for p in service["spec"]["ports"] if p["port"] == int(worker_flags["--master-port"])
    )
    assert _port_number(master, port["targetPort"]) == int(master_flags["--master-bind-port"])
    assert _get(objects, "Deployment", "locust-worker")["spec"]["replicas"] >= 1


def test_locust_targets_the_triton_service(rendered) -> None:
    _, objects = rendered
    triton = _triton(objects)
    for name in ("locust-master", "locust-worker"):
        env = {
            e["name"]: e["value"]
            for e in _container(_pod(objects, "Deployment", name), "locust")["env"]
        }
        host, port = re.fullmatch(r"http://([a-z-]+):(\d+)", env["LOCUST_HOST"]).groups()
        service = _get(objects, "Service", host)
        target = next(p["targetPort"] for p in service["spec"]["ports"] if p["port"] == int(port))
        # The Service's port is the front door's, which forwards to Triton's HTTP port.
        door = _front_door(objects)
        assert _port_number(door, target) == int(_env(door)["FRONT_HTTP_LISTEN"])
        upstream = _env(door)["TRITON_HTTP_UPSTREAM"]
        assert upstream == f"127.0.0.1:{_flags(triton['args'])['--http-port']}"


# -- the model repository: built by the Job, served by Triton ---------------------------------


def _mount_of_claim(pod: dict[str, Any], container: dict[str, Any]) -> tuple[str, str, bool]:
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    (mount,) = [m for m in container["volumeMounts"] if m["name"] in claims]
    return claims[mount["name"]], mount["mountPath"], mount.get("readOnly", False)


def test_repository_path_is_the_same_in_the_build_job_and_triton(rendered) -> None:
    _, objects = rendered
    job_pod = _pod(objects, "Job", "triton-model-build")
    build = _container(job_pod, "build-engines")
    triton_pod = _pod(objects, "Deployment", "triton")
    triton = _container(triton_pod, "triton")
    claim, job_path, job_read_only = _mount_of_claim(job_pod, build)
    assert not job_read_only
    output = build["args"][build["args"].index("--output-repository") + 1]
    assert output == job_path
    served_claim, triton_path, read_only = _mount_of_claim(triton_pod, triton)
    assert (served_claim, read_only) == (claim, True)
    assert _flags(triton["args"])["--model-repository"] == triton_path == job_path
    _get(objects, "PersistentVolumeClaim", claim)
    # Pods wait for the marker the Job writes last, on the same volume.
    marker = re.search(r"date -u > (\S+)", build["args"][0]).group(1)
    wait = _container(triton_pod, "wait-for-repository", init=True)
    assert f"[ -f {marker} ]" in " ".join(wait["command"])
    assert _mount_of_claim(triton_pod, wait)[:2] == (claim, triton_path)


def _plan_check_script() -> str:
    pod = _pod(_render(K8S / "overlays/gpu"), "Deployment", "triton")
    container = _container(pod, "plan-check", init=True)
    assert container["command"] == ["python3", "-c"]
    return container["args"][0]


def _run_plan_check(script: str, repository: Path) -> subprocess.CompletedProcess[str]:
    assert '"/models"' in script
    return subprocess.run(
        [sys.executable, "-c", script.replace('"/models"', repr(str(repository)))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_plan_check_init_container_passes_onnx_and_stops_unverifiable_plans(
    model_repository: Path, tmp_path: Path
) -> None:
    """The init container's own script: this machine's ONNX repository passes; a plan with
    no sidecar (unknown TensorRT/GPU) stops the pod with the rebuild command."""
    script = _plan_check_script()
    ok = _run_plan_check(script, model_repository)
    assert ok.returncode == 0, ok.stderr
    assert "plan check: 0 TensorRT models" in ok.stdout
    version = tmp_path / "resnet50_model" / "1"
    version.mkdir(parents=True)
    (version / "model.plan").write_bytes(b"not a plan")
    (tmp_path / "resnet50_model" / "config.pbtxt").write_text('platform: "tensorrt_plan"\n')
    bad = _run_plan_check(script, tmp_path)
    assert bad.returncode == 1
    assert "resnet50_model" in bad.stderr and "rebuild with" in bad.stderr


def test_plan_check_image_has_the_code_it_runs() -> None:
    """The init container imports server.plan_check (and through it build_engines.engines.tensorrt)
    from the build-engines image: its Dockerfile must copy both and its .dockerignore let
    them through."""
    script = _plan_check_script()
    dockerfile = (ROOT / "docker/build-engines.Dockerfile").read_text()
    ignore = (ROOT / "docker/build-engines.Dockerfile.dockerignore").read_text().splitlines()
    imported = set(re.findall(r"from triton_kit\.(\w+)\.", script)) | {"build_engines"}
    for package in (f"triton_kit/{name}" for name in sorted(imported)):
        assert re.search(rf"^COPY {package} /opt/triton-kit/{package}$", dockerfile, re.M), package
        assert f"!{package}/" in ignore, package
