"""The torch pre-processing path decodes an execute call's images within a pixel budget.

A GPU build's max batch (256) of images at the per-image limit (40 MP) would be ~30 GB
decoded at once; the torch path (a KIND_GPU instance's nvJPEG path, here on CPU through
``torch_on_cpu``) decodes and resizes in chunks of at most DECODE_PIXEL_BUDGET decoded pixels,
counted from the headers, with results and their order as one-shot decoding gives them.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from triton_kit.python_models.common.base import InvalidInput
from triton_kit.python_models.common.contracts import DECODE_PIXEL_BUDGET
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.resnet50.gpu import budget_chunks
from triton_kit.python_models.resnet50.image import ImageLimits
from triton_kit.python_models.resnet50.model import ImagePreprocessor, RawImagePreprocessor

LARGEST = (8000, 5000)  # exactly ImageLimits.max_pixels: legal


def _torch_path(cls, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)  # setup sets it
    model = cls()
    model.model_name = cls.__name__
    model.params = ModelParameters({"torch_on_cpu": "true"})
    model.setup()
    assert model.recipe is not None
    return model


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ImagePreprocessor:
    return _torch_path(ImagePreprocessor, monkeypatch)


def _encode(size: tuple[int, int], rgb: tuple[int, int, int], fmt: str = "JPEG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, rgb).save(buffer, format=fmt)
    return buffer.getvalue()


def _requests(*images: list[bytes]) -> list[dict[str, np.ndarray]]:
    return [{"IMAGE": np.array([[d] for d in request], np.object_)} for request in images]


def test_the_budget_holds_at_least_one_image_at_the_per_image_limit() -> None:
    assert ImageLimits().max_pixels <= DECODE_PIXEL_BUDGET


def test_decoded_pixels_held_at_once_stay_within_the_budget(
    model: ImagePreprocessor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four legal 40 MP JPEGs (160 M pixels, twice the budget) in one execute call: no decode
    call is given more than the budget, nor is more decoded before the resize frees it."""
    recipe = model.recipe
    events: list[tuple[str, int]] = []

    def decode_jpegs(datas):  # a spy for nvJPEG: records the pixels each call would decode
        sizes = [Image.open(io.BytesIO(d)).size for d in datas]
        events.append(("decode", sum(w * h for w, h in sizes)))
        return [torch.zeros((3, 8, 8), dtype=torch.uint8) for _ in datas]  # cheap stand-ins

    resize = recipe.resize

    def resized(images):
        events.append(("resize", len(images)))
        return resize(images)

    monkeypatch.setattr(recipe, "torchvision", True)  # the nvJPEG branch, as on a GPU
    monkeypatch.setattr(recipe, "decode_jpegs", decode_jpegs)
    monkeypatch.setattr(recipe, "resize", resized)
    large = _encode(LARGEST, (200, 30, 90))
    results = model.process_batch(_requests([large, large], [large], [large]))

    assert not [r for r in results if isinstance(r, Exception)]
    assert [r["PIXELS"].shape[0] for r in results] == [2, 1, 1]
    assert sum(n for kind, n in events if kind == "decode") == 4 * LARGEST[0] * LARGEST[1]
    held = 0
    for kind, count in events:
        held = held + count if kind == "decode" else 0
        assert held <= DECODE_PIXEL_BUDGET, events


def test_chunked_outputs_equal_one_shot_decoding(model: ImagePreprocessor) -> None:
    """A normal batch, JPEG and PNG of several sizes over several requests, decoded a few
    images per chunk: the same bytes, in the same order, as decoding all at once."""
    recipe = model.recipe
    sizes = [(48, 40), (300, 200), (64, 96), (257, 255), (120, 120), (40, 300), (500, 375)]
    datas = [
        _encode(size, (37 * i % 256, 11 * i % 256, 90), "PNG" if i % 3 == 0 else "JPEG")
        for i, size in enumerate(sizes)
    ]
    one_shot = recipe.pixels(recipe.decode(datas, model.limits))
    recipe.pixel_budget = 300 * 200  # two or three of these images per chunk
    results = model.process_batch(_requests(datas[:3], datas[3:4], datas[4:]))
    chunked = np.concatenate([r["PIXELS"] for r in results])
    assert chunked.dtype == one_shot.dtype and chunked.tobytes() == one_shot.tobytes()


def test_an_over_limit_image_fails_its_own_request_only(model: ImagePreprocessor) -> None:
    """One image just over 40 MP between good ones: its request gets InvalidInput naming the
    limit (never decoded), the others the pixels they get alone."""
    model.recipe.pixel_budget = 200 * 150  # chunks of one good image: the bad one sits between
    good = [_encode((200, 150), (10 * i, 100, 200)) for i in range(4)]
    bad = _encode((LARGEST[0] + 1, LARGEST[1]), (1, 2, 3))
    results = model.process_batch(_requests(good[:2], [bad], good[2:3], [good[3], bad]))

    for index in (1, 3):
        assert isinstance(results[index], InvalidInput)
        assert "limit is 40000000 pixels" in str(results[index])
    for request, result in ((good[:2], results[0]), (good[2:3], results[2])):
        (alone,) = model.process_batch(_requests(request))
        assert isinstance(result, dict) and result["PIXELS"].tobytes() == alone["PIXELS"].tobytes()


def test_uint8_images_go_to_the_device_within_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RawImagePreprocessor's torch path: the request's images copied and resized a budget's
    worth at a time, with the bytes of copying them all at once."""
    model = _torch_path(RawImagePreprocessor, monkeypatch)
    recipe = model.recipe
    images = np.random.default_rng(0).integers(0, 256, (5, 60, 80, 3), dtype=np.uint8)
    one_shot = recipe.pixels([recipe.from_hwc(image) for image in images])
    copied: list[int] = []
    upload = recipe._upload

    def uploaded(arrays):
        copied.append(len(arrays))
        return upload(arrays)

    monkeypatch.setattr(recipe, "_upload", uploaded)
    monkeypatch.setattr(recipe, "pixel_budget", 2 * 60 * 80)
    (result,) = model.process_batch([{"IMAGE_UINT8": images}])
    assert copied == [2, 2, 1]
    assert result["PIXELS"].tobytes() == one_shot.tobytes()


@pytest.mark.parametrize(
    ("pixels", "budget", "chunks"),
    [
        ([], 10, []),
        ([3, 3, 3, 3], 6, [[0, 1], [2, 3]]),
        ([3, 12, 3, 4], 6, [[0], [1], [2], [3]]),  # over the budget: alone
        ([1, 2, 3, 0, 5], 6, [[0, 1, 2, 3], [4]]),
    ],
)
def test_budget_chunks_keep_order_and_total(
    pixels: list[int], budget: int, chunks: list[list[int]]
) -> None:
    assert list(budget_chunks(pixels, budget)) == chunks
