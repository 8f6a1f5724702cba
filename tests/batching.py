"""Proof that requests really shared execute calls, from Triton's own statistics."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import tritonclient.grpc as grpcclient


def execution_count(grpc_url: str, model: str) -> int:
    client = grpcclient.InferenceServerClient(grpc_url.removeprefix("grpc://"))
    try:
        stats = client.get_inference_statistics(model, as_json=True)["model_stats"]
        return sum(int(entry.get("execution_count", 0)) for entry in stats)
    finally:
        client.close()


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
