"""Locust's web UI with the kit's locustfile, through a real Locust process and real Triton.

Checks what a dashboard user sees: the kit's options among the custom parameters, a
warning when fewer users than families leave a model untested, per-model rows, and
``/stop`` answering POST. Locust runs in its own process group, killed in teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT, require_models
from triton_kit.server import TritonServer, free_port

ROOT = PROJECT_ROOT


@contextlib.contextmanager
def _locust(host: str, port: int, log: Path, *extra: str) -> Iterator[subprocess.Popen]:
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        "triton_kit/loadtest/locustfile.py",
        "--host",
        host,
    ]
    command += ["--web-host", "127.0.0.1", "--web-port", str(port), *extra]
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def _post(url: str, data: bytes = b"") -> bytes:
    request = urllib.request.Request(url, data=data, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read()


def _wait(condition, process: subprocess.Popen, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "locust exited early"
        with contextlib.suppress(OSError, ValueError):
            if condition():
                return
        time.sleep(0.5)
    raise AssertionError(f"condition not met within {timeout} s")


@pytest.mark.slow
def test_web_ui_shows_options_warns_on_idle_families_and_stops(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    require_models("bert")
    port = free_port()
    web = f"http://127.0.0.1:{port}"
    log = tmp_path / "locust.log"
    with _locust(triton_server.http_url, port, log) as process:
        _wait(lambda: b"locust" in _get(web + "/").lower(), process)
        page = _get(web + "/").decode()
        for option in ("weights", "beam_size", "max_length", "request_timeout", "steps"):
            assert f'"{option}"' in page, f"--{option} is not among the web UI's parameters"
        assert '"model_name"' not in page  # a list option the form would mangle
        # One user for three families: two classes get nobody, and the log says so.
        form = b"user_count=1&spawn_rate=1&host=" + triton_server.http_url.encode()
        form += b"&weights=bert%3D1&beam_size=2"
        assert json.loads(_post(web + "/swarm", form))["success"]
        _wait(lambda: "got no users" in log.read_text(), process)
        assert "start at least 3 users" in log.read_text()
        _post(web + "/stop")
        _wait(lambda: json.loads(_get(web + "/stats/requests"))["state"] == "stopped", process)
        stats = json.loads(_get(web + "/stats/requests"))
        names = {e["name"] for e in stats["stats"] if e["name"] != "Aggregated"}
        assert all(name.split()[0] in {"resnet50", "bert", "nmt"} for name in names), names
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
