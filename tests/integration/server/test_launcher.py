"""The launcher's failure modes, each against the real tritonserver binary."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.doubler import write_doubler
from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.build_engines.repository import Tensor, onnx_model_config, write_model
from triton_kit.server import (
    BinaryNotFoundError,
    ModelLoadError,
    PortInUseError,
    ServerConfig,
    TritonServer,
)
from triton_kit.server.launcher import parse_load_failures


def _config(repository: Path, tmp_path: Path, **overrides: object) -> ServerConfig:
    defaults = dict(
        model_repository=repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=tmp_path / "server.log",
        startup_timeout_s=120.0,
    )
    return ServerConfig(**{**defaults, **overrides})


def _broken_repository(root: Path) -> Path:
    """An ONNX model whose file is not ONNX: the backend must fail and Triton say why."""
    config = onnx_model_config(
        "broken", [Tensor("x", "FP32", (4,))], [Tensor("y", "FP32", (4,))], 4
    )
    write_model(root, config, {"model.onnx": b"this is not an onnx file"})
    return root


def _pids_in_group(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(
            PortInUseError, match=f"http port {port} on 127.0.0.1 is already in use"
        ):
            TritonServer(_config(tmp_path, tmp_path, http_port=port)).start()


def test_model_load_failure_quotes_tritons_reason(tmp_path: Path) -> None:
    repository = _broken_repository(tmp_path / "repo")
    with pytest.raises(ModelLoadError) as raised:
        TritonServer(_config(repository, tmp_path)).start()
    assert "broken" in raised.value.failures
    reason = raised.value.failures["broken"]
    assert "INVALID_PROTOBUF" in reason or "Protobuf parsing failed" in reason, reason
    assert "server.log" in str(raised.value)


def test_missing_binary_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITONSERVER", str(tmp_path / "no-such-tritonserver"))
    with pytest.raises(BinaryNotFoundError, match="TRITONSERVER="):
        TritonServer(_config(tmp_path, tmp_path)).start()


def test_stop_leaves_no_processes(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    server = TritonServer(_config(tmp_path / "empty", tmp_path))
    with server:
        assert server.is_ready()
        pgid = server._process.pid
    deadline = time.monotonic() + 10
    while _pids_in_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _pids_in_group(pgid) == []


def test_server_dies_with_a_killed_caller(tmp_path: Path) -> None:
    """SIGKILL gives the caller no chance to clean up; the kernel must take the server down."""
    (tmp_path / "empty").mkdir()
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        from pathlib import Path
        from triton_kit.server import ServerConfig, TritonServer
        s = TritonServer(ServerConfig(model_repository=Path({str(tmp_path / "empty")!r}),
            http_port=0, grpc_port=0, metrics_port=0, log_file=Path({str(tmp_path / "c.log")!r})))
        s.start()
        print(s._process.pid, flush=True)
        time.sleep(600)
        """
    )
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(caller.stdout.readline())
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(timeout=10)
        deadline = time.monotonic() + 20
        while _pids_in_group(server_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _pids_in_group(server_pid) == [], "tritonserver outlived its killed caller"
    finally:
        if caller.poll() is None:
            caller.kill()


def test_load_failures_are_parsed_from_both_log_forms() -> None:
    log = (
        "E1122 model_lifecycle.cc:654] "
        "\"failed to load 'a' version 1: Invalid argument: bad dims\"\n"
        "| b     | 1       | UNAVAILABLE: Internal: boom |\n"
    )
    assert parse_load_failures(log) == {"a": "Invalid argument: bad dims", "b": "Internal: boom"}


# -- latency summaries: off unless asked for (42% of ResNet-50 throughput on the H100) ------


def _metrics_after_one_request(tmp_path: Path, **overrides: object) -> str:
    import urllib.request

    import numpy as np
    import tritonclient.http as httpclient

    repository = tmp_path / "repository"
    write_doubler(repository, "doubler")
    with TritonServer(_config(repository, tmp_path, **overrides)) as server:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        x = httpclient.InferInput("X", [1, 4], "FP32")
        x.set_data_from_numpy(np.arange(4, dtype=np.float32)[None])
        y = client.infer("doubler", [x]).as_numpy("Y")
        np.testing.assert_array_equal(y, [[0, 2, 4, 6]])
        with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
            return reply.read().decode()


@pytest.mark.slow
def test_latency_summaries_are_off_by_default(tmp_path: Path) -> None:
    """Summaries cost 42% of ResNet-50's throughput under load on the H100
    (issue 30; 0.63x in benchmarks/results/gpu_serving.md); the cumulative counters stay."""
    text = _metrics_after_one_request(tmp_path)
    assert 'nv_inference_request_duration_us{model="doubler"' in text
    assert "nv_inference_request_summary_us" not in text


@pytest.mark.slow
def test_latency_summaries_when_asked_for(tmp_path: Path) -> None:
    text = _metrics_after_one_request(tmp_path, latency_summaries=True)
    assert 'nv_inference_request_summary_us{model="doubler"' in text
