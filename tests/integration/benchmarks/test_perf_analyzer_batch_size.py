"""perf_analyzer's rows say how many rows each execution carried (its inference count over its
execution count): by Little's law ResNet-50's c256 load ran batches of about 42 rows on four
instances (session 45), which is the figure that decides how near the engine's bs256 speed a
served load can come. Measured, it need not be worked out.

A real bare tritonserver serving the python doubler, real perf_analyzer over gRPC; Triton's own
statistics over the same load are the independent reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bare_server import bare_server_for_perf_analyzer
from tests.support.batching import execution_count, inference_count
from triton_kit.benchmarks.harness import model_alone, perf_analyzer
from triton_kit.benchmarks.harness.tiny_model import write_doubler

MAX_BATCH = 8


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("batches")
    # A long delay: the batcher waits for a full batch of the concurrency's requests.
    write_doubler(root / "repo", "batched", max_batch_size=MAX_BATCH, queue_delay_us=200_000)
    write_doubler(root / "repo", "alone", max_batch_size=MAX_BATCH)
    with bare_server_for_perf_analyzer(root / "repo") as server:
        yield server.grpc


def _triton_counts(url: str, model: str) -> tuple[int, int]:
    return inference_count(url, model), execution_count(url, model)


def test_a_row_gives_the_rows_each_execution_carried(server: str, tmp_path: Path) -> None:
    before = _triton_counts(server, "batched")
    row = perf_analyzer.run(server, "batched", MAX_BATCH, 1.0, tmp_path,
                            stability=model_alone.STABILITY)  # fmt: skip
    assert "error" not in row, row.get("error")
    after = _triton_counts(server, "batched")
    batch = row["server"]["rows_per_execution"]
    # Triton's totals over the whole call (warm-up windows too) agree with the measured ones
    whole_call = (after[0] - before[0]) / (after[1] - before[1])
    assert 0.8 * whole_call <= batch <= MAX_BATCH
    assert batch > MAX_BATCH / 2  # c8 behind a 200 ms delay: mostly full batches of 8


def test_one_request_in_flight_makes_executions_of_one_row(server: str, tmp_path: Path) -> None:
    row = perf_analyzer.run(server, "alone", 1, 1.0, tmp_path, stability=100)
    assert "error" not in row, row.get("error")
    assert row["server"]["rows_per_execution"] == 1.0
