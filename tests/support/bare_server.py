"""A bare ``tritonserver`` on loopback ports over a repository, as the benchmarks start one
(``benchmarks.launcher.bare_command``): for tests of what perf_analyzer's rows report."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from triton_kit.benchmarks.launcher import bare_command, stop
from triton_kit.loadtest.tune.environment import perf_analyzer as installed_perf_analyzer
from triton_kit.server.binary import assemble_backend_dir, find_installation, server_environment
from triton_kit.server.launcher import free_ports, wait_ready


class BareServer(NamedTuple):
    grpc: str  # host:port
    pid: int
    http: str  # host:port


@contextmanager
def bare_server_for_perf_analyzer(repository: Path) -> Iterator[BareServer]:
    """Its endpoints and pid, with perf_analyzer installed beside this interpreter."""
    installed_perf_analyzer(Path(sys.executable).parent / "perf_analyzer")
    installation = find_installation()
    backends = assemble_backend_dir(installation, Path(tempfile.mkdtemp()) / "b")
    ports = free_ports(3)
    process = subprocess.Popen(bare_command(repository, backends, ports),
                               env=server_environment(installation),
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    try:
        assert wait_ready(f"http://127.0.0.1:{ports[0]}", 120.0, process=process)
        yield BareServer(f"127.0.0.1:{ports[1]}", process.pid, f"127.0.0.1:{ports[0]}")
    finally:
        stop(process)
