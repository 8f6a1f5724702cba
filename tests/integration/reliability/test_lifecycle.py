"""Kill, leak and restart faults of the embedded server (issue 12, items 1-3), real Triton."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient

from tests.integration.reliability.conftest import tiny_config
from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.server import TritonServer, free_port, free_ports
from triton_kit.server.launcher import wait_ready
from triton_kit.server.shm import PREFIX, SHM_DIR

pytestmark = pytest.mark.reliability


def _wait_ready(port: int, timeout_s: float = 120.0) -> None:
    assert wait_ready(f"http://127.0.0.1:{port}", timeout_s), (
        f"server on port {port} not ready after {timeout_s} s"
    )


def _slow_request(port: int, seconds: float) -> threading.Thread:
    """An in-flight request, so a SIGTERM'd server would wait out its exit timeout."""

    def call() -> None:
        try:
            with httpclient.InferenceServerClient(f"127.0.0.1:{port}", network_timeout=60) as c:
                x = httpclient.InferInput("X", [1, 1], "FP32")
                x.set_data_from_numpy(np.array([[seconds]], dtype=np.float32))
                c.infer("echo", [x])
        except Exception:
            pass  # the server is killed under it; only the server's fate is checked

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def _ours(pid: int) -> list[str]:
    return sorted(p.name for p in SHM_DIR.iterdir() if p.name.startswith(f"{PREFIX}{pid}_"))


def test_sigkill_to_launcher_group_takes_server_and_stubs_down(
    tiny_repository: Path, tmp_path: Path
) -> None:
    """The issue's reproduction: SIGKILL the launcher's process group with work in flight."""
    port, grpc_port, metrics_port = free_ports(3)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "triton_kit.server", "serve",
         "--model-repository", str(tiny_repository),
         "--http-port", str(port), "--grpc-port", str(grpc_port),
         "--metrics-port", str(metrics_port), "--log-file", str(tmp_path / "server.log")],
        cwd=PROJECT_ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_ready(port)
        children = psutil.Process(launcher.pid).children(recursive=True)
        assert any(c.name() == "tritonserver" for c in children), children
        _slow_request(port, 30.0)
        time.sleep(1.0)
        regions = _ours(launcher.pid)
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(10)
        _, alive = psutil.wait_procs(children, timeout=5)
        assert not alive, f"still running 5 s after the kill: {alive}"
        assert regions, "the launch's python-backend regions carry the kit's prefix"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
    # Item 2: the dead launcher's regions are removed by the next start, nobody else's.
    # (the stubs may unlink their own regions on the way down; a SIGKILLed stub cannot)
    leftover = SHM_DIR / f"{PREFIX}{launcher.pid}_deadbeef_triton_python_backend_shm_region_x"
    leftover.write_bytes(b"x")
    bystander = SHM_DIR / "triton_python_backend_shm_region_not-ours-test"
    bystander.write_bytes(b"x")
    try:
        with TritonServer(tiny_config(tiny_repository, tmp_path, log_file=tmp_path / "2.log")):
            assert not leftover.exists()
            assert _ours(launcher.pid) == []
            assert bystander.exists()
    finally:
        bystander.unlink()


def test_stop_removes_its_shared_memory(tiny_repository: Path, tmp_path: Path) -> None:
    server = TritonServer(tiny_config(tiny_repository, tmp_path))
    with server:
        live = [p for p in SHM_DIR.iterdir() if p.name.startswith(server.shm_prefix)]
        assert live
    assert not [p for p in SHM_DIR.iterdir() if p.name.startswith(server.shm_prefix)]


def _time_wait_on(port: int) -> None:
    """Leave a TIME-WAIT socket on ``port``: the listening side closes first."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()
        time.sleep(0.1)
        client.close()
    states = subprocess.run(["ss", "-tan"], capture_output=True, text=True).stdout
    assert f"127.0.0.1:{port} " in states and "TIME-WAIT" in states


def test_restart_succeeds_while_only_time_wait_remains(
    tiny_repository: Path, tmp_path: Path
) -> None:
    port = free_port()
    _time_wait_on(port)
    with TritonServer(tiny_config(tiny_repository, tmp_path, http_port=port)) as server:
        assert server.is_ready()


def test_restricted_endpoints_need_the_key(tiny_repository: Path, tmp_path: Path) -> None:
    """Items 12-13: logging and shared memory refuse keyless clients; the key opens them."""
    with TritonServer(tiny_config(tiny_repository, tmp_path)) as server:
        request = urllib.request.Request(
            f"{server.http_url}/v2/logging", data=json.dumps({"log_verbose_level": 1}).encode()
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 403, refused.value.code
        from triton_kit.server.security import api_key_headers

        headers = api_key_headers(server.api_key)
        for name, value in headers.items():
            request.add_header(name, value)
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200
        url = server.http_url.removeprefix("http://")
        with httpclient.InferenceServerClient(url) as client:
            with pytest.raises(Exception, match=r"restricted|403|key|API"):
                client.register_system_shared_memory("probe", "/triton_kit_probe", 64)
            import tritonclient.utils.shared_memory as shm

            handle = shm.create_shared_memory_region("probe", "/triton_kit_probe_test", 64)
            try:
                client.register_system_shared_memory(
                    "probe", "/triton_kit_probe_test", 64, headers=headers
                )
                status = client.get_system_shared_memory_status(headers=headers)
                assert any(r["name"] == "probe" for r in status), status
                client.unregister_system_shared_memory("probe", headers=headers)
            finally:
                shm.destroy_shared_memory_region(handle)
        # Inference stays open to everyone.
        assert server.is_ready()
