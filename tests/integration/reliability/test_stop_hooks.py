"""Compose and Kubernetes stop paths drain a bare tritonserver (no launcher), for real.

Neither deployment runs the launcher, so neither gets its drain on SIGTERM: Kubernetes
runs ``python3 -S -m triton_kit.server.drain`` as the preStop hook before the kubelet's SIGTERM,
and compose runs tritonserver under docker/drain-on-stop.sh, which drains when `docker
compose stop` SIGTERMs it. Each test takes the command from the rendered manifest or
the resolved compose file and runs it against the wheel's tritonserver with the
deployment's own Triton flags, with the files laid out as the serving image copies
them (``-S``: only PYTHONPATH, i.e. what the image carries, is importable) and
ensemble and BLS requests in flight (tests/integration/reliability/test_drain.py's repository).
Every one must complete, new work be refused, and Triton exit within the grace.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.build.deploy.test_compose import COMPOSE_FILE, compose_stop_path
from tests.build.deploy.test_compose import run as run_compose_tool
from tests.integration.deploy.test_k8s import K8S, _render, _triton, pre_stop_drain
from tests.integration.reliability.test_drain import (
    BLS_REQUESTS,
    ENSEMBLE_REQUESTS,
    _infer,
    write_drain_repository,
)
from tests.support.prerequisites import PROJECT_ROOT, require_tool
from triton_kit.server import free_ports
from triton_kit.server.binary import assemble_backend_dir, find_installation, server_environment
from triton_kit.server.launcher import http_ready
from triton_kit.server.shm import new_prefix, prefix_args, remove_regions

pytestmark = pytest.mark.reliability
ROOT = PROJECT_ROOT
KEY = "test-drain-key"
IMAGE_ROOT = "/opt/triton-kit"


def image_layout(dest: Path) -> Path:
    """What triton.Dockerfile copies under /opt/triton-kit, at ``dest`` (dirs linked)."""
    for line in (ROOT / "docker/triton.Dockerfile").read_text().splitlines():
        parts = line.split()
        if not parts or parts[0] != "COPY" or not parts[-1].startswith(IMAGE_ROOT):
            continue
        target = dest / parts[-1][len(IMAGE_ROOT) :].strip("/")
        for source in parts[1:-1]:
            path = target / Path(source).name if parts[-1].endswith("/") else target
            path.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / source).is_dir():
                path.symlink_to(ROOT / source)
            else:
                shutil.copy2(ROOT / source, path)
    return dest


def start_in_flight(pool: ThreadPoolExecutor, ports: dict[str, int]) -> list:
    models = ["chain"] * ENSEMBLE_REQUESTS + ["bls"] * BLS_REQUESTS
    futures = [pool.submit(_infer, ports, "grpc", m) for m in models]
    time.sleep(0.7)  # all sent, at most one echo batch done: the rest is in flight
    return futures


def check_drained(futures: list, in_flight: int, late: str, took_s: float, grace_s: float) -> None:
    results = [f.result() for f in futures]
    assert in_flight >= len(futures) // 2, f"only {in_flight} requests were in flight"
    failed = [r for r in results if r != "ok"]
    assert not failed, f"{len(failed)} of {len(results)} in-flight requests failed: {failed[:3]}"
    assert late != "ok", "a request sent during the drain was accepted"
    assert took_s < grace_s, f"stopped {took_s:.1f} s after the signal; grace is {grace_s} s"


def start_ready(argv: list[str], env: dict[str, str], log: Path, port: int) -> subprocess.Popen:
    """Start a bare server and wait until ready; once more if it died while loading (on
    this oversubscribed machine a python stub has aborted Triton with a
    boost::interprocess::lock_exception during model load: not what is tested here)."""
    for attempt in (1, 2):
        with open(log.with_suffix(f".{attempt}.log"), "wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                       cwd=log.parent, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            if http_ready(f"http://127.0.0.1:{port}"):
                return process
            time.sleep(0.3)
        _kill(process)
    pytest.fail(f"server not ready on port {port}; see {log.parent}")


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def test_kubernetes_pre_stop_drains_in_flight_work(tmp_path: Path) -> None:
    """Hook first (pause 0: no endpoints here), then the kubelet's SIGTERM."""
    require_tool("kubectl")
    objects = _render(K8S / "overlays/cpu")
    triton = _triton(objects)
    grace = objects_grace(objects)
    ports = dict(zip(("http", "grpc", "metrics"), free_ports(3), strict=True))
    own = ("--model-repository", "--http-port", "--grpc-port", "--metrics-port")
    flags = [a.replace("$(TRITON_KIT_API_KEY)", KEY) for a in triton["args"]]
    flags = [a for a in flags if not a.startswith(own)]
    installation = find_installation()
    command = [
        str(installation.binary),
        f"--model-repository={write_drain_repository(tmp_path / 'repo')}",
        f"--backend-directory={assemble_backend_dir(installation, tmp_path / 'backends')}",
        *(f"--{p}-address=127.0.0.1" for p in ports),
        *(f"--{p}-port={n}" for p, n in ports.items()),
        *prefix_args(prefix := new_prefix()),  # the launcher's region names, removed below
        *flags,
    ]
    drain = pre_stop_drain(triton)
    command_hook = triton["lifecycle"]["preStop"]["exec"]["command"]
    options = {"--url": f"http://127.0.0.1:{ports['http']}", "--pause": "0"}  # no endpoints here
    hook = [sys.executable, *(a for a in command_hook[1:] if not a.startswith(tuple(options)))]
    hook += [f"{k}={v}" for k, v in options.items()]
    env = {"TRITON_KIT_API_KEY": KEY, "PYTHONPATH": str(image_layout(tmp_path / "opt"))}
    server = start_ready(
        command, server_environment(installation), tmp_path / "server", ports["http"]
    )
    try:
        with ThreadPoolExecutor(ENSEMBLE_REQUESTS + BLS_REQUESTS) as pool:
            futures = start_in_flight(pool, ports)
            in_flight, start = sum(not f.done() for f in futures), time.monotonic()
            pre_stop = subprocess.Popen(hook, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
            time.sleep(0.5)
            late = _infer(ports, "grpc", "chain")
            _, hook_err = pre_stop.communicate(timeout=float(drain["--timeout"]) + 10)
            server.send_signal(signal.SIGTERM)  # the kubelet, once the hook has returned
            code = server.wait(grace)
            took = time.monotonic() - start
            check_drained(futures, in_flight, late, took, grace)
    finally:
        _kill(server)
        remove_regions(prefix)
    assert pre_stop.returncode == 0, hook_err.decode()
    assert code == 0, f"tritonserver exited with {code}"


def objects_grace(objects: list) -> float:
    deployment = next(o for o in objects if o["kind"] == "Deployment" and
                      o["metadata"]["name"] == "triton")  # fmt: skip
    return float(deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])


def test_compose_stop_drains_in_flight_work(tmp_path: Path) -> None:
    """The triton-cpu service's own `sh -c` command, SIGTERM'd as `docker compose stop` does."""
    compose = require_tool("docker-compose")
    resolved = run_compose_tool(compose, "-f", str(COMPOSE_FILE), "--profile", "cpu", "config")
    assert resolved.returncode == 0, resolved.stderr
    service = yaml.safe_load(resolved.stdout)["services"]["triton-cpu"]
    compose_stop_path(service)  # asserts the entrypoint wraps tritonserver
    grace = float(re.fullmatch(r"(\d+)s", service["stop_grace_period"]).group(1))
    ports = dict(zip(("http", "grpc", "metrics"), free_ports(3), strict=True))
    installation = find_installation()
    backends = assemble_backend_dir(installation, tmp_path / "backends")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tritonserver").write_text(
        f'#!/bin/sh\nexec {installation.binary} --backend-directory={backends} '
        + " ".join(f"--{p}-address=127.0.0.1 --{p}-port={n}" for p, n in ports.items())
        + " " + " ".join(prefix_args(prefix := new_prefix()))
        + ' "$@"\n'
    )  # fmt: skip
    (bin_dir / "tritonserver").chmod(0o755)
    opt = image_layout(tmp_path / "opt")
    repo = write_drain_repository(tmp_path / "repo")
    script = service["command"][2].replace("$$", "$")  # `config` prints compose's escape
    script = script.replace(IMAGE_ROOT, str(opt)).replace("/models", str(repo))
    env = {**server_environment(installation), **service["environment"],
           "TRITON_KIT_API_KEY": KEY, "PYTHONPATH": str(opt),
           "PATH": f"{bin_dir}:{server_environment(installation)['PATH']}",
           "TRITON_KIT_DRAIN_URL": f"http://127.0.0.1:{ports['http']}"}  # fmt: skip
    script = script.replace("triton-kit-api-key=test", f"triton-kit-api-key={KEY}")
    container = start_ready(["sh", "-c", script], env, tmp_path / "server", ports["http"])
    try:
        with ThreadPoolExecutor(ENSEMBLE_REQUESTS + BLS_REQUESTS) as pool:
            futures = start_in_flight(pool, ports)
            in_flight, start = sum(not f.done() for f in futures), time.monotonic()
            container.send_signal(signal.SIGTERM)  # docker compose stop -> PID 1
            time.sleep(0.5)
            late = _infer(ports, "grpc", "chain")
            code = container.wait(grace)
            took = time.monotonic() - start
            check_drained(futures, in_flight, late, took, grace)
    finally:
        _kill(container)
        remove_regions(prefix)
    log_text = sorted(tmp_path.glob("server.*.log"))[-1].read_text(errors="replace")
    assert "drain incomplete" not in log_text, log_text[-2000:]
    assert code == 0, f"the entrypoint exited with {code}; log ends:\n{log_text[-2000:]}"
