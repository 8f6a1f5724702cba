"""Proof that requests really shared execute calls, from Triton's own statistics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import tritonclient.grpc as grpcclient

T = TypeVar("T")


def _statistic(grpc_url: str, model: str, key: str) -> int:
    client = grpcclient.InferenceServerClient(grpc_url.removeprefix("grpc://"))
    try:
        stats = client.get_inference_statistics(model, as_json=True)["model_stats"]
        return sum(int(entry.get(key, 0)) for entry in stats)
    finally:
        client.close()


def execution_count(grpc_url: str, model: str) -> int:
    """Execute calls ``model`` has run."""
    return _statistic(grpc_url, model, "execution_count")


def inference_count(grpc_url: str, model: str) -> int:
    """Rows ``model`` has run (with ``max_batch_size`` > 0, a call's batch counts each)."""
    return _statistic(grpc_url, model, "inference_count")


def counts_at_rest(
    grpc_url: str, model: str, quiet_s: float = 0.3, timeout_s: float = 10.0
) -> tuple[int, int]:
    """(execution, inference) counts of ``model`` once they stop moving for ``quiet_s``: the
    baseline for :func:`settled_counts`. Read at once, it can miss a BLS call an earlier test
    made whose statistics land later, which then counts as this test's (seen in a full run:
    2 executions counted for 1)."""
    deadline = time.monotonic() + timeout_s
    counts = execution_count(grpc_url, model), inference_count(grpc_url, model)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = execution_count(grpc_url, model), inference_count(grpc_url, model)
        if now == counts:
            break
        counts = now
    return counts


def settled_counts(
    grpc_url: str, model: str, before: tuple[int, int], rows: int, timeout_s: float = 10.0
) -> tuple[int, int]:
    """(execution, inference) counts of ``model`` once ``rows`` more rows and an execution
    more are counted, and the counts have come to rest.

    A model called through BLS answers its caller before Triton records the call's
    statistics, so counts read right after the caller's response can lag by a call (seen
    under load: 2 executions counted for 3), and the two counts need not land together (seen
    in a full run: the rows counted, the execution not yet: 0 executions for 1)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        counts = execution_count(grpc_url, model), inference_count(grpc_url, model)
        if counts[0] > before[0] and counts[1] - before[1] >= rows:
            break
        time.sleep(0.05)
    return counts_at_rest(grpc_url, model, timeout_s=max(deadline - time.monotonic(), 1.0))


@contextmanager
def co_batched(grpc_url: str, model: str, requests: int) -> Iterator[None]:
    """Fail unless ``model`` ran the block's ``requests`` in fewer execute calls."""
    before = execution_count(grpc_url, model)
    yield
    executions = execution_count(grpc_url, model) - before
    assert 0 < executions < requests, (
        f"{model}: {executions} executions for {requests} requests; "
        "the requests never shared an execute call (no dynamic batching?)"
    )


def first_co_batched(
    grpc_url: str, model: str, requests: int, run: Callable[[], T], rounds: int = 5
) -> T:
    """``run()`` (which sends ``requests`` requests at once) until they shared an execute call
    of ``model``; that round's result. Fails after ``rounds`` rounds without sharing.

    Under load on two cores, concurrent requests can still reach an idle instance one at a
    time (seen in CI: 7 requests, 7 executions). Such a round proves nothing about per-request
    isolation inside a shared execute, so it is run again rather than counted as a pass.
    """
    seen = []
    for _ in range(rounds):
        before = execution_count(grpc_url, model)
        result = run()
        executions = execution_count(grpc_url, model) - before
        if 0 < executions < requests:
            return result
        seen.append(executions)
    raise AssertionError(
        f"{model}: {seen} executions in {rounds} rounds of {requests} requests; "
        "the requests never shared an execute call (no dynamic batching?)"
    )
