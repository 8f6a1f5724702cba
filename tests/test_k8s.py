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
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from server import ServerConfig, TritonServer
from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy/k8s"
OVERLAYS = ("gpu", "cpu")
ADMIN_KEY = "test-admin-key"
# Flags the embedded launcher sets itself (paths and loopback ports of this machine).
LAUNCHER_FLAGS = ("--model-repository", "--http-port", "--grpc-port", "--metrics-port")


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
    _, objects = rendered
    triton = _triton(objects)
    flags = _flags(triton["args"])
    expected = {"startupProbe": "/v2/health/ready", "readinessProbe": "/v2/health/ready"}
    expected["livenessProbe"] = "/v2/health/live"
    for probe, path in expected.items():
        get = triton[probe]["httpGet"]
        assert get["path"] == path, probe
        assert _port_number(triton, get["port"]) == int(flags["--http-port"]), probe
    ports = {p["name"]: p["containerPort"] for p in triton["ports"]}
    assert ports == {
        "http": int(flags["--http-port"]),
        "grpc": int(flags["--grpc-port"]),
        "metrics": int(flags["--metrics-port"]),
    }
    startup = triton["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "model load time"


def test_services_reach_the_ports_triton_opens(rendered) -> None:
    _, objects = rendered
    triton = _triton(objects)
    labels = _get(objects, "Deployment", "triton")["spec"]["template"]["metadata"]["labels"]
    expected = {"triton": {"http", "grpc"}, "triton-grpc": {"grpc"}, "triton-metrics": {"metrics"}}
    for name, port_names in expected.items():
        service = _get(objects, "Service", name)
        assert _selects(service["spec"]["selector"], labels), name
        assert {p["targetPort"] for p in service["spec"]["ports"]} == port_names
        for port in service["spec"]["ports"]:
            _port_number(triton, port["targetPort"])  # raises if the name is not opened
    assert _get(objects, "Service", "triton-grpc")["spec"]["clusterIP"] == "None"


def test_graceful_termination_outlasts_the_drain(rendered) -> None:
    _, objects = rendered
    pod = _pod(objects, "Deployment", "triton")
    triton = _container(pod, "triton")
    exit_timeout = int(_flags(triton["args"])["--exit-timeout-secs"])
    pre_stop = triton["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > exit_timeout + int(pre_stop[1])


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


# -- the flags, on the real server -----------------------------------------------------------


def _manifest_flags_for_embedded(triton: dict[str, Any]) -> list[str]:
    args = [a.replace("$(TRITON_ADMIN_KEY)", ADMIN_KEY) for a in triton["args"]]
    assert all("$(" not in a for a in args), "every $(VAR) in args must be an env var we know"
    env = {e["name"] for e in triton["env"]}
    assert "TRITON_ADMIN_KEY" in env
    return [a for a in args if not a.startswith(LAUNCHER_FLAGS)]


def _status(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_manifest_flags_run_on_triton_and_restrict_the_admin_apis(tmp_path: Path) -> None:
    """The Deployment's own flags on Triton 2.51: probes answer, admin APIs need the key."""
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
    )
    with TritonServer(config) as server:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = triton[probe]["httpGet"]["path"]
            assert _status(server.http_url + path) == 200, probe
        index = f"{server.http_url}/v2/repository/index"
        assert _status(index, data=b"{}") == 403
        assert _status(index, data=b"{}", headers={"triton-admin-key": ADMIN_KEY}) == 200
        assert _status(f"{server.http_url}/v2/models/stats") == 200, "statistics stay open"
        assert _status(f"{server.metrics_url}/metrics") == 200
