"""perf_analyzer's rows say how many cores the client and the server kept busy: a side near its
cores' count caps the load (the suspect for ResNet-50 c256 at 0.82x on session 43's slower
hosts against 0.90x on session 42's, with the same GPU and the in-process best unchanged).

A real bare tritonserver serving the python doubler, real perf_analyzer over gRPC.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from triton_kit.benchmarks.harness import model_alone, perf_analyzer
from triton_kit.benchmarks.harness.tiny_model import write_doubler
from triton_kit.benchmarks.launcher import bare_command, stop
from triton_kit.loadtest.tune.environment import perf_analyzer as installed_perf_analyzer
from triton_kit.server.binary import assemble_backend_dir, find_installation, server_environment
from triton_kit.server.launcher import free_ports, wait_ready


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    installed_perf_analyzer(Path(sys.executable).parent / "perf_analyzer")
    root = tmp_path_factory.mktemp("busy")
    write_doubler(root / "repo", "doubler")
    backends = assemble_backend_dir(find_installation(), Path(tempfile.mkdtemp()) / "b")
    ports = free_ports(3)
    process = subprocess.Popen(bare_command(root / "repo", backends, ports),
                               env=server_environment(find_installation()),
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    try:
        assert wait_ready(f"http://127.0.0.1:{ports[0]}", 120.0, process=process)
        yield f"127.0.0.1:{ports[1]}", process.pid
    finally:
        stop(process)


def test_a_row_gives_the_cores_the_client_and_the_server_kept_busy(
    server: tuple[str, int], tmp_path: Path
) -> None:
    url, pid = server
    row = perf_analyzer.run(url, "doubler", 2, 1.0, tmp_path, stability=model_alone.STABILITY,
                            server_pid=pid)  # fmt: skip
    assert "error" not in row, row.get("error")
    busy = row["cpu"]
    cores = os.cpu_count() or 1
    # Both sides worked (a python stub serves each request) and none beyond the machine.
    assert 0.05 < busy["client_cores"] <= cores and 0.05 < busy["server_cores"] <= cores
    unknown = perf_analyzer.run(url, "doubler", 1, 1.0, tmp_path, stability=100)
    assert set(unknown["cpu"]) == {"client_cores"}  # no server pid: the client's only
