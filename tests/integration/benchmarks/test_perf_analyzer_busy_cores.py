"""perf_analyzer's rows say how many cores the client and the server kept busy: a side near its
cores' count caps the load (the suspect for ResNet-50 c256 at 0.82x on session 43's slower
hosts against 0.90x on session 42's, with the same GPU and the in-process best unchanged).

A real bare tritonserver serving the python doubler, real perf_analyzer over gRPC.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bare_server import bare_server_for_perf_analyzer
from triton_kit.benchmarks.harness import model_alone, perf_analyzer
from triton_kit.benchmarks.harness.tiny_model import write_doubler


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    root = tmp_path_factory.mktemp("busy")
    write_doubler(root / "repo", "doubler")
    with bare_server_for_perf_analyzer(root / "repo") as server:
        yield server.grpc, server.pid


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
