"""A lone client never waits in Triton's queue (Triton 2.51's batcher without prefetching).

With any queue-policy field set, Triton 2.51's dynamic batcher stops prefetching
(``PriorityQueue::SupportPrefetching``); a request that arrives while the single instance
is finishing the previous execute then waits for the batcher's 500 ms poll. A closed
loop at concurrency 1 hits that often: ``resnet50_model`` measured p95 534 ms (p50 33 ms)
and 0.38x in-process throughput. Measured here from Triton's own statistics.
"""

from __future__ import annotations

import time

import numpy as np
import tritonclient.grpc as grpcclient

from tests.support.prerequisites import require_models

REQUESTS = 100


def _stats(client: grpcclient.InferenceServerClient, model: str) -> tuple[int, int]:
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    inference = stats["inference_stats"]
    return int(inference["success"].get("count", 0)), int(inference["queue"].get("ns", 0))


def test_a_lone_client_does_not_wait_in_resnet50_models_queue(triton_server) -> None:
    require_models("resnet50")
    client = grpcclient.InferenceServerClient(triton_server.grpc_url.removeprefix("grpc://"))
    pixels = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)

    def infer() -> None:
        tensor = grpcclient.InferInput("pixel_values", list(pixels.shape), "FP32")
        tensor.set_data_from_numpy(pixels)
        client.infer("resnet50_model", [tensor])

    infer()  # warm-up
    time.sleep(0.1)  # its statistics land when its execute ends
    before = _stats(client, "resnet50_model")
    for _ in range(REQUESTS):
        infer()
    deadline = time.monotonic() + 10
    while (after := _stats(client, "resnet50_model"))[0] < before[0] + REQUESTS:
        assert time.monotonic() < deadline, "statistics never caught up"
        time.sleep(0.05)
    client.close()
    queue_ms = (after[1] - before[1]) / (after[0] - before[0]) / 1e6
    # ~0.1 ms with prefetching; with the policy, 25 ms over 40 requests (a few waited 500 ms).
    assert queue_ms < 10, f"{queue_ms:.1f} ms queue per request at concurrency 1"
