"""``wait_ready`` stops waiting when the server it waits for has exited (a tritonserver that
fails to load a model exits; two GPU runs of issue 30 waited out 600 s on one)."""

from __future__ import annotations

import subprocess
import sys
import time

from triton_kit.server.launcher import free_ports, wait_ready


def test_returns_false_at_once_when_the_server_process_has_exited() -> None:
    (port,) = free_ports(1)
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    exited.wait()
    started = time.monotonic()
    assert not wait_ready(f"http://127.0.0.1:{port}", 30.0, process=exited)
    assert time.monotonic() - started < 5.0


def test_without_a_process_it_waits_out_the_timeout() -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    assert not wait_ready(f"http://127.0.0.1:{port}", 1.0)
    assert time.monotonic() - started >= 1.0
