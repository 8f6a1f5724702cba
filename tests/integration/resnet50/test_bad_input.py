"""Bad images get INVALID_ARG naming the problem; good ones in the same batch still succeed."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.batching import first_co_batched
from tests.support.images import encode, jpeg, make_image
from tests.support.prerequisites import require_models
from tests.support.reference import imagenet_label, resnet50_reference
from triton_kit.client import InvalidInputError, TritonClient

MAX_BYTES = 20 * 1024 * 1024  # the documented limit, restated rather than imported


@pytest.fixture(scope="module", autouse=True)
def _models() -> None:
    require_models("resnet50")


def _huge_png() -> bytes:
    """8000x6000 = 48 MP, over the 40 MP limit, yet only ~150 kB compressed."""
    return encode(Image.new("L", (8000, 6000)), "PNG")


BAD_IMAGES = {
    "empty": (b"", "empty"),
    "truncated-jpeg": (jpeg()[: len(jpeg()) // 2], "could not be decoded"),
    "random-bytes": (np.random.default_rng(0).bytes(4096), "not a decodable image"),
    "text-file": (b"name,value\nalpha,1\nbeta,2\n" * 20, "not a decodable image"),
    "one-pixel": (encode(Image.new("RGB", (1, 1)), "PNG"), "at least 8 pixels"),
    "too-many-pixels": (None, "the limit is 40000000 pixels"),
    "too-many-bytes": (None, f"the limit is {MAX_BYTES} bytes"),
}


def _payload(name: str) -> bytes:
    data, _ = BAD_IMAGES[name]
    if name == "too-many-pixels":
        return _huge_png()
    if name == "too-many-bytes":
        return jpeg() + os.urandom(MAX_BYTES)  # a valid JPEG with trailing junk
    return data


@pytest.mark.parametrize("name", list(BAD_IMAGES))
def test_bad_image_is_rejected_with_reason(triton_client: TritonClient, name: str) -> None:
    with pytest.raises(InvalidInputError, match=BAD_IMAGES[name][1]):
        triton_client.classify(_payload(name))
    assert triton_client.server_ready()


def test_one_corrupt_image_in_a_batch_fails_alone(
    triton_client: TritonClient, triton_server, model_repository: Path
) -> None:
    good = [encode(make_image(200 + 10 * i, 180, "RGB", i), "PNG") for i in range(6)]
    batch = [*good[:3], jpeg()[:500], *good[3:]]
    results = first_co_batched(
        triton_server.grpc_url,
        "resnet50_preprocess",
        len(batch),
        lambda: triton_client.classify_batch(batch, return_exceptions=True),
    )
    assert isinstance(results[3], InvalidInputError)
    assert "could not be decoded" in str(results[3])
    for data, result in zip(good, results[:3] + results[4:], strict=True):
        assert not isinstance(result, Exception), result
        assert result.class_ids == resnet50_reference(model_repository, data)[0].tolist()
    assert triton_client.server_ready()


def test_batch_without_return_exceptions_names_the_item(triton_client: TritonClient) -> None:
    with pytest.raises(InvalidInputError, match="item 1"):
        triton_client.classify_batch([jpeg(), b"not an image"])


def test_unsupported_type_in_pil_is_converted(
    triton_client: TritonClient, model_repository: Path
) -> None:
    """CMYK is not in the test matrix's modes but must classify as its RGB conversion does."""
    cmyk = make_image(120, 90, "RGB", 7).convert("CMYK")
    buffer = io.BytesIO()
    cmyk.save(buffer, format="JPEG")
    result = triton_client.classify(buffer.getvalue())
    ids, scores = resnet50_reference(model_repository, buffer.getvalue())
    assert result.class_ids == ids.tolist()
    np.testing.assert_allclose(result.scores, scores, rtol=0, atol=1e-4)
    assert [p.label for p in result.predictions] == [imagenet_label(i) for i in ids]


def _raw_infer(url: str, array: np.ndarray, dtype: str) -> None:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    tensor = grpcclient.InferInput("IMAGE", list(array.shape), dtype)
    tensor.set_data_from_numpy(array)
    client.infer("resnet50", [tensor])


@pytest.mark.parametrize(
    ("array", "dtype", "reason"),
    [
        (np.zeros((1, 1), dtype=np.float32), "FP32", "data-type"),
        (np.array([[jpeg(), jpeg()]], dtype=np.object_), "BYTES", "shape"),
        (np.array([[jpeg()]] * 17, dtype=np.object_), "BYTES", "batch"),
    ],
    ids=["wrong-dtype", "wrong-shape", "oversized-batch"],
)
def test_wrong_dtype_shape_or_batch_is_invalid_argument(
    triton_server, array: np.ndarray, dtype: str, reason: str
) -> None:
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException) as raised:
        _raw_infer(triton_server.grpc_url, array, dtype)
    assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert reason in raised.value.message().lower()
    assert triton_server.is_ready()
