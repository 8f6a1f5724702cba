"""`python -m triton_kit.server serve` runs the real server until SIGTERM, then exits cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.prerequisites import PROJECT_ROOT, require_models
from triton_kit.client import TritonClient
from triton_kit.server import free_port


def test_serve_answers_then_stops_on_sigterm(model_repository: Path, tmp_path: Path) -> None:
    require_models("bert")
    http, grpc, metrics = free_port(), free_port(), free_port()
    command = [
        sys.executable,
        "-m",
        "triton_kit.server",
        "serve",
        "--model-repository",
        str(model_repository),
    ]
    command += ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    command += ["--log-file", str(tmp_path / "triton.log")]
    log = open(tmp_path / "serve.out", "wb")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        with TritonClient(f"grpc://127.0.0.1:{grpc}", timeout=30) as triton:
            triton.wait_until_ready(timeout=120, models=["bert"])
            assert triton.embed("hello").shape[0] == 1
        with TritonClient(f"http://127.0.0.1:{http}", timeout=30) as triton:
            assert triton.model_ready("bert")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, (tmp_path / "serve.out").read_text()[-2000:]
        time.sleep(0.5)
        with TritonClient(f"http://127.0.0.1:{http}", timeout=2) as triton:
            assert not _answers(triton), "the server still answers after SIGTERM"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def _answers(triton: TritonClient) -> bool:
    try:
        return triton.server_ready()
    except Exception:
        return False


def test_free_ports_are_distinct_and_bindable() -> None:
    """Two ``free_port()`` calls in a row can return one port (CI once started Triton with the
    same gRPC and metrics port, and it refused to start): ``free_ports`` holds each socket
    until all are chosen."""
    import socket

    from triton_kit.server import free_ports

    ports = free_ports(8)
    assert len(set(ports)) == 8
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
