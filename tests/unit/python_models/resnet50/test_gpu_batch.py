"""A GPU build's max batch (GPU_MAX_BATCH, 256) through the pre-processors (issue 30).

Nothing in them is sized by the batch: both paths (PIL, and the torch path a KIND_GPU
instance runs, here on CPU through ``torch_on_cpu``) take 256 JPEGs as 256 requests of one
image or one request of 256, and 256 UINT8 images in one request, each image to its own row.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from triton_kit.build_engines.families.resnet50 import GPU_MAX_BATCH
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.resnet50.model import ImagePreprocessor, RawImagePreprocessor

MEAN_R, STD_R = 0.485, 0.229  # ImageNet normalisation, red channel
SIZE = (48, 40)  # small images: the batch, not the resize, is under test


def _model(cls, torch_path: bool):
    model = cls()
    model.model_name = cls.__name__
    model.params = ModelParameters({"torch_on_cpu": "true"} if torch_path else {})
    model.setup()
    assert (model.recipe is not None) == torch_path
    return model


def _reds() -> list[int]:
    return [(7 * i) % 256 for i in range(GPU_MAX_BATCH)]


def _jpeg(red: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", SIZE, (red, 128, 64)).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def _assert_rows_in_order(pixels: np.ndarray, levels: float) -> None:
    assert pixels.shape == (GPU_MAX_BATCH, 3, 224, 224) and pixels.dtype == np.float32
    red = pixels[:, 0, 112, 112] * STD_R + MEAN_R  # back to [0, 1]
    np.testing.assert_allclose(red * 255, _reds(), atol=levels)


@pytest.mark.parametrize("torch_path", [False, True], ids=["pil", "torch"])
def test_max_batch_of_jpegs(monkeypatch: pytest.MonkeyPatch, torch_path: bool) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)  # setup sets it
    model = _model(ImagePreprocessor, torch_path)
    datas = [_jpeg(red) for red in _reds()]
    one_each = model.process_batch([{"IMAGE": np.array([[d]], np.object_)} for d in datas])
    assert not [r for r in one_each if isinstance(r, Exception)]
    _assert_rows_in_order(np.concatenate([r["PIXELS"] for r in one_each]), levels=3)
    together = model.process_batch([{"IMAGE": np.array([[d] for d in datas], np.object_)}])
    _assert_rows_in_order(together[0]["PIXELS"], levels=3)


@pytest.mark.parametrize("torch_path", [False, True], ids=["pil", "torch"])
def test_max_batch_of_uint8_images(monkeypatch: pytest.MonkeyPatch, torch_path: bool) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
    model = _model(RawImagePreprocessor, torch_path)
    images = np.zeros((GPU_MAX_BATCH, SIZE[1], SIZE[0], 3), np.uint8)
    images[..., 0] = np.array(_reds(), np.uint8)[:, None, None]
    (result,) = model.process_batch([{"IMAGE_UINT8": images}])
    _assert_rows_in_order(result["PIXELS"], levels=0.01)
