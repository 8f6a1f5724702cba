"""Real Locust runs against the session's real Triton: headless, web UI, exits and SLOs.

Locust always runs as a subprocess in its own process group (importing it would
monkey-patch pytest with gevent), bounded by a timeout, and the group is killed in
teardown whatever happened.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.prerequisites import PROJECT_ROOT, require_models
from triton_kit.loadtest import recorder
from triton_kit.server import TritonServer, free_port

ROOT = PROJECT_ROOT
LOCUST = [sys.executable, "-m", "locust", "-f", "triton_kit/loadtest/locustfile.py"]


def _family_or_skip(family: str) -> None:
    """Every family is built by `make models`: a missing one fails, it is not skipped."""
    require_models(family)


def _url(server: TritonServer, protocol: str) -> str:
    return server.grpc_url if protocol == "grpc" else server.http_url


@contextlib.contextmanager
def _process(command: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """A process group that cannot outlive the test."""
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _run_loadtest(args: list[str], out: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "triton_kit.loadtest", "run", "--out", str(out), *args]
    log = out.parent / f"{out.name}.log"
    with _process(command, log) as process:
        code = process.wait(timeout=timeout)
    return subprocess.CompletedProcess(command, code, log.read_text(errors="replace"), "")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["resnet50", "bert", "nmt"])
def test_headless_stepped_run_per_model_and_protocol(
    triton_server: TritonServer, protocol: str, family: str, tmp_path: Path
) -> None:
    _family_or_skip(family)
    url = _url(triton_server, protocol)
    out = tmp_path / "run"
    steps = ["--steps", "1,2", "--step-time", "4", "--settle-time", "1"]
    result = _run_loadtest(["--host", url, "--models", family, *steps], out)
    assert result.returncode == 0, result.stdout[-4000:]
    took = float(re.search(r"done in ([0-9.]+) s", result.stdout)[1])
    assert took < 8 + 10, f"Locust took {took} s for 8 s of steps: it did not stop by itself"

    rows = json.loads((out / "summary.json").read_text())
    assert [row["users"] for row in rows] == [1, 2]
    for row in rows:
        assert row["model"] == family and row["protocol"] == protocol
        assert row["requests"] > 0, row
        assert row["failures"] == 0, row
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
        assert row["server"], "Triton's statistics were not read over the window"
        assert row["server"][0]["requests"] > 0
    for name in ("summary.md", "summary.csv", "latency.png", "throughput.png"):
        assert (out / name).stat().st_size > 0, name
    locust_dir = out / protocol
    assert (locust_dir / "locust.html").stat().st_size > 0
    _assert_sub_millisecond(locust_dir)


def _assert_sub_millisecond(locust_dir: Path) -> None:
    """Our samples are exact; Locust's own CSV percentiles keep 0.1 ms, not whole ms."""
    _, arrays, _ = recorder.load(locust_dir / "raw.npz")
    samples = arrays["ms"]
    assert samples.size > 0
    assert np.any(np.abs(samples - np.round(samples)) > 0.05), "response times are whole ms"
    with open(locust_dir / "locust_stats.csv") as handle:
        rows = list(csv.DictReader(handle))
    percentiles = [float(row[p]) for row in rows for p in ("50%", "75%", "90%", "99%")]
    fine = [v for v in percentiles if v < 100]  # above 100 ms Locust keeps 3 digits
    # At 0.1 ms resolution one value in ten is a whole number by chance: judge only from
    # three or more (a false failure then has a chance of 1e-3 or less).
    if len(fine) >= 3:
        assert any(abs(v - round(v)) > 0.05 for v in fine), fine


@pytest.mark.slow
def test_impossible_p99_threshold_exits_non_zero_and_names_it(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    require_models("bert")  # fast enough to complete requests in a short window under load
    out = tmp_path / "slo"
    args = ["--host", triton_server.grpc_url, "--models", "bert", "--steps", "1"]
    args += ["--step-time", "4", "--settle-time", "1", "--slo-p99-ms", "0.001"]
    result = _run_loadtest(args, out)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "SLO breach: grpc bert at 1 users: p99 " in result.stdout, result.stdout[-3000:]
    assert "> 0.001 ms" in result.stdout


@pytest.mark.slow
def test_missing_model_is_skipped_with_a_message(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    require_models("bert")
    args = ["--host", triton_server.http_url, "--models", "bert,nmt", "--steps", "1"]
    args += ["--step-time", "3", "--settle-time", "1", "--model-name", "nmt=no_such_model"]
    result = _run_loadtest(args, tmp_path / "skip")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "nmt: model 'no_such_model' is not loaded" in result.stdout
    rows = json.loads((tmp_path / "skip" / "summary.json").read_text())
    assert {row["model"] for row in rows} == {"bert"}


@pytest.mark.slow
def test_grpc_users_without_wait_stop_at_run_time(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    """The reported hang: 8 gRPC users with no wait. It must stop at --run-time by itself."""
    require_models("resnet50")
    command = [*LOCUST, "--headless", "--host", triton_server.grpc_url, "-u", "8", "-r", "8"]
    command += ["--run-time", "4s", "--only-summary", "ResNet50User"]
    started = time.monotonic()
    with _process(command, tmp_path / "locust.log") as process:
        code = process.wait(timeout=40)
    elapsed = time.monotonic() - started
    log = (tmp_path / "locust.log").read_text()
    assert code == 0, log[-3000:]
    assert elapsed < 4 + 12, f"took {elapsed:.1f} s for a 4 s run"
    assert "Aggregated" in log


@pytest.mark.slow
def test_grpc_run_ends_on_sigterm(triton_server: TritonServer, tmp_path: Path) -> None:
    require_models("resnet50")
    command = [*LOCUST, "--headless", "--host", triton_server.grpc_url, "-u", "8", "-r", "8"]
    with _process([*command, "ResNet50User"], tmp_path / "locust.log") as process:
        time.sleep(6)
        assert process.poll() is None, (tmp_path / "locust.log").read_text()[-3000:]
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
        assert time.monotonic() - sent < 10


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


@pytest.mark.slow
def test_web_dashboard_swarms_and_reports(triton_server: TritonServer, tmp_path: Path) -> None:
    require_models("resnet50", "bert", "nmt")  # fails, not skips, when one is missing
    port = free_port()
    web = f"http://127.0.0.1:{port}"
    command = [*LOCUST, "--host", triton_server.http_url, "--web-host", "127.0.0.1"]
    with _process([*command, "--web-port", str(port)], tmp_path / "locust.log") as process:
        _wait_for(lambda: b"locust" in _get(web + "/").lower(), process)
        form = b"user_count=3&spawn_rate=3&host=" + triton_server.http_url.encode()
        request = urllib.request.Request(web + "/swarm", data=form, method="POST")
        assert json.loads(urllib.request.urlopen(request, timeout=5).read())["success"]
        families = {"resnet50", "bert", "nmt"}  # one user each
        _wait_for(lambda: families <= _models_seen(web), process, timeout=60)
        stats = json.loads(_get(web + "/stats/requests"))
        assert stats["fail_ratio"] == 0, stats["errors"]
        urllib.request.urlopen(urllib.request.Request(web + "/stop", method="POST"), timeout=5)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)


def _models_seen(web: str) -> set[str]:
    stats = json.loads(_get(web + "/stats/requests"))
    return {e["name"].split()[0] for e in stats["stats"] if e["num_requests"] > 0}


def _wait_for(
    condition: Callable[[], bool], process: subprocess.Popen, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "locust exited early"
        with contextlib.suppress(OSError, ValueError):
            if condition():
                return
        time.sleep(0.5)
    raise AssertionError(f"condition not met within {timeout} s")
