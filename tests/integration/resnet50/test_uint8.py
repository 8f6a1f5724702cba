"""The SDK's classify() with decoded images: numpy uint8 RGB arrays and PIL images (issue 10).

Decoded images go as pixels to ``resnet50_uint8``; encoded ones to ``resnet50``. Results
are checked against tests/support/reference.py (the ImageNet recipe restated with PIL and numpy,
run on the encoded bytes), on both protocols and both twins. Bad arrays are refused by
the SDK before anything is sent: shown with a client whose URL has no server behind it.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.images import case_bytes
from tests.support.prerequisites import require_models
from tests.support.reference import imagenet_label, resnet50_reference
from tests.support.shm_regions import own_regions
from triton_kit.client import (
    AsyncTritonClient,
    Classification,
    InvalidInputError,
    ModelUnavailableError,
    TritonClient,
)
from triton_kit.server import free_port

SCORE_TOLERANCE = 1e-4
# RGB JPEG, RGBA PNG, greyscale JPEG, palette PNG: every conversion to RGB the client makes.
NAMES = ("320x240-RGB-JPEG", "500x375-RGBA-PNG", "300x200-L-JPEG", "333x222-P-PNG")
CASES = [case for case in case_bytes() if case[0] in NAMES]


@pytest.fixture(scope="module", autouse=True)
def _models() -> None:
    require_models("resnet50", "resnet50_uint8", "resnet50_uint8_preprocess")


def decoded(data: bytes) -> np.ndarray:
    """What a client that decodes itself holds: RGB uint8 [height, width, 3]."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def assert_reference(result: object, repository: Path, data: bytes, k: int = 5) -> None:
    assert isinstance(result, Classification), result
    ids, scores = resnet50_reference(repository, data, k)
    assert result.class_ids == ids.tolist()
    np.testing.assert_allclose(result.scores, scores, rtol=0, atol=SCORE_TOLERANCE)
    assert [p.label for p in result.predictions] == [imagenet_label(i) for i in ids]


def test_cases_cover_every_mode() -> None:
    modes = {Image.open(io.BytesIO(data)).mode for _, data in CASES}
    assert modes == {"RGB", "RGBA", "L", "P"}, [name for name, _ in CASES]


# ---- before sending: no server behind the URL, so only the SDK can answer ----------------

BAD_ARRAYS = {
    "float32": (np.zeros((16, 16, 3), np.float32), "dtype uint8"),
    "int64": (np.zeros((16, 16, 3), np.int64), "dtype uint8"),
    "greyscale-2d": (np.zeros((16, 16), np.uint8), r"\[height, width, 3\]"),
    "batched-4d": (np.zeros((2, 16, 16, 3), np.uint8), "one image per item of classify_batch"),
    "rgba": (np.zeros((16, 16, 4), np.uint8), "3 channels"),
    "chw": (np.zeros((3, 16, 16), np.uint8), "3 channels"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARRAYS))
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bad_arrays_are_refused_before_sending(protocol: str, case: str) -> None:
    image, message = BAD_ARRAYS[case]
    url = f"{protocol}://127.0.0.1:{free_port()}"
    with (
        TritonClient(url, timeout=5, retry=0) as client,
        pytest.raises(InvalidInputError, match=message) as caught,
    ):
        client.classify(image)
    assert caught.value.status == "INVALID_ARGUMENT"
    assert str(image.shape) in str(caught.value), "the message names the shape it got"


async def test_async_bad_arrays_are_refused_before_sending() -> None:
    client = AsyncTritonClient(f"grpc://127.0.0.1:{free_port()}", timeout=5, retry=0)
    try:
        for image, message in BAD_ARRAYS.values():
            with pytest.raises(InvalidInputError, match=message):
                await client.classify(image)
    finally:
        await client.close()


def test_uint8_model_name_is_an_option() -> None:
    with TritonClient("grpc://127.0.0.1:1", models={"classify_uint8": "my_pixels"}) as client:
        assert client.models["classify_uint8"] == "my_pixels"
        assert client.models["classify"] == "resnet50"
    with TritonClient("grpc://127.0.0.1:1") as client:
        assert client.models["classify_uint8"] == "resnet50_uint8"


# ---- against the server --------------------------------------------------------------------


def test_arrays_and_pil_images_classify_like_the_reference(
    triton_client: TritonClient, model_repository: Path
) -> None:
    for _, data in CASES:
        assert_reference(triton_client.classify(decoded(data)), model_repository, data)
        pil = Image.open(io.BytesIO(data))  # its own mode: the client converts to RGB
        assert_reference(triton_client.classify(pil, top_k=3), model_repository, data, 3)


async def test_async_arrays_and_pil_images_classify_like_the_reference(
    async_triton_client: AsyncTritonClient, model_repository: Path
) -> None:
    for _, data in CASES:
        result = await async_triton_client.classify(decoded(data))
        assert_reference(result, model_repository, data)
        pil = Image.open(io.BytesIO(data))
        assert_reference(await async_triton_client.classify(pil), model_repository, data)


def _mixed(tmp_path: Path) -> tuple[list[object], list[bytes]]:
    """Bytes, an array, a PIL image, a path and a non-contiguous array (a BGR view, flipped
    back), with the encoded bytes each must be classified like."""
    (_, first), (_, second), (_, third), (_, fourth) = CASES[:4]
    path = tmp_path / "fourth.img"
    path.write_bytes(fourth)
    bgr = np.ascontiguousarray(decoded(second)[..., ::-1])
    images = [first, decoded(second), Image.open(io.BytesIO(third)), path, bgr[..., ::-1]]
    return images, [first, second, third, fourth, second]


def test_classify_batch_mixes_encoded_and_decoded_images(
    triton_client: TritonClient, model_repository: Path, tmp_path: Path
) -> None:
    images, expected = _mixed(tmp_path)
    results = triton_client.classify_batch(images)
    for result, data in zip(results, expected, strict=True):
        assert_reference(result, model_repository, data)


async def test_async_classify_batch_mixes_encoded_and_decoded_images(
    async_triton_client: AsyncTritonClient, model_repository: Path, tmp_path: Path
) -> None:
    images, expected = _mixed(tmp_path)
    results = await async_triton_client.classify_batch(images)
    for result, data in zip(results, expected, strict=True):
        assert_reference(result, model_repository, data)


def test_a_bad_array_fails_alone_in_a_batch(
    triton_client: TritonClient, model_repository: Path
) -> None:
    (_, data), *_ = CASES
    too_small = np.zeros((4, 300, 3), np.uint8)  # passes the SDK; the server refuses it
    wrong = np.zeros((16, 16, 4), np.uint8)  # refused by the SDK
    good, small, bad = triton_client.classify_batch(
        [decoded(data), too_small, wrong], return_exceptions=True
    )
    assert_reference(good, model_repository, data)
    assert isinstance(small, InvalidInputError) and "at least 8 pixels" in str(small)
    assert small.status == "INVALID_ARGUMENT" and small.model == "resnet50_uint8"
    assert isinstance(bad, InvalidInputError) and "3 channels" in str(bad)
    with pytest.raises(InvalidInputError, match=r"^item 1: .*at least 8 pixels"):
        triton_client.classify_batch([decoded(data), too_small])


def test_decoded_images_go_to_the_configured_model(server_url: str) -> None:
    (_, data), *_ = CASES
    models = {"classify_uint8": "no_such_uint8_model"}
    with TritonClient(server_url, timeout=120, models=models, retry=0) as client:
        with pytest.raises(ModelUnavailableError, match="no_such_uint8_model"):
            client.classify(decoded(data))
        assert len(client.classify(data).predictions) == 5  # encoded: still resnet50


def test_large_arrays_travel_through_system_shared_memory(
    server_url: str, triton_server, model_repository: Path
) -> None:
    (_, data), *_ = (case for case in case_bytes() if case[0].startswith("1024x768"))
    with TritonClient(
        server_url,
        timeout=120,
        shared_memory="system",
        shared_memory_threshold=1 << 20,  # the 1024x768 array is 2.25 MiB
        api_key=triton_server.api_key,
    ) as client:
        assert_reference(client.classify(decoded(data)), model_repository, data)
        assert own_regions(), "the array did not go through shared memory"
