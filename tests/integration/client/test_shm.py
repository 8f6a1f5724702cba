"""SDK shared memory (issue 10): CUDA refused clearly where it cannot work, system round-trips.

The CUDA option is measured on the lent H100 (triton_kit/benchmarks/gpu/run.py, ``gpu`` test
in tests/integration/client/test_sdk_server.py); here, on CPU, it must fail at construction
with a message naming the option and the alternative, for both twins.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from tests.support.prerequisites import require_models
from tests.support.shm_regions import own_regions
from triton_kit.client import AsyncTritonClient, ConfigurationError, TritonClient
from triton_kit.server import TritonServer

NO_GPU = not torch.cuda.is_available()


@pytest.mark.skipif(not NO_GPU, reason="a GPU is visible: CUDA shared memory can work here")
@pytest.mark.parametrize("twin", [TritonClient, AsyncTritonClient])
def test_cuda_shared_memory_is_refused_clearly_without_a_gpu(twin: type) -> None:
    """Whether cuda-python is missing or present without a GPU, the message says what to do."""
    with pytest.raises(ConfigurationError) as caught:
        twin("grpc://127.0.0.1:1", shared_memory="cuda")
    message = str(caught.value)
    assert "shared_memory='cuda'" in message and "shared_memory='system'" in message
    assert "cuda-python" in message or "0 CUDA GPU" in message


def test_system_shared_memory_is_not_refused() -> None:
    TritonClient("grpc://127.0.0.1:1", shared_memory="system").close()


def _png(side: int) -> bytes:
    rng = np.random.default_rng(side)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


async def test_async_system_shared_memory_round_trips_and_is_released(
    triton_server: TritonServer,
) -> None:
    require_models("resnet50")
    image = _png(300)  # ~270 KB: above the 64 KiB threshold used here
    with TritonClient(triton_server.grpc_url, timeout=120) as plain:
        expected = plain.classify(image)
    async with AsyncTritonClient(
        triton_server.grpc_url,
        timeout=120,
        shared_memory="system",
        shared_memory_threshold=64 << 10,
        api_key=triton_server.api_key,
    ) as client:
        assert await client.classify(image) == expected
        assert await client.classify(image) == expected  # the region is reused
        assert own_regions(), "the input did not go through shared memory"
    assert not own_regions(), "close() left regions behind"
