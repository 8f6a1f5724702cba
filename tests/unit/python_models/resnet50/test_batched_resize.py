"""The torch pre-processing path resizes an execute call's images one stack per size (issue 30).

On the GPU host kernel launches are slow and were ~8 per image: the pre-processor capped the
ResNet-50 ensembles. Same-size images now go through each step together, so the resize calls
per execute follow the number of distinct sizes, not of images, for JPEGs and UINT8 images
alike; the pixels are today's per-image pixels (restated below as the reference), and a bad
request still fails alone. Run on CPU torch through ``torch_on_cpu``, as the other tests of
the GPU path are; the top-k post-processor likewise sorts every request's rows in one call.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from tests.support.images import case_bytes, make_image
from triton_kit.python_models.common.base import InvalidInput
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.resnet50 import model as model_module
from triton_kit.python_models.resnet50.gpu import TorchPreprocess, same_size_groups
from triton_kit.python_models.resnet50.image import PreprocessSpec, resized_size
from triton_kit.python_models.resnet50.model import (
    ImagePreprocessor,
    RawImagePreprocessor,
    TopKPostprocessor,
)


def _model(cls, monkeypatch: pytest.MonkeyPatch, **parameters: str):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)  # setup sets it
    model = cls()
    model.model_name = cls.__name__
    model.params = ModelParameters({"torch_on_cpu": "true", **parameters})
    model.setup()
    assert model.recipe is not None
    return model


def _interpolate_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts torch's interpolate calls from now on: the batch size of each."""
    calls: list[int] = []
    interpolate = torch.nn.functional.interpolate

    def counted(x, *args, **kwargs):
        calls.append(x.shape[0])
        return interpolate(x, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "interpolate", counted)
    return calls


def _per_image_reference(recipe: TorchPreprocess, image: torch.Tensor) -> np.ndarray:
    """What the torch path computed before (one image at a time), restated: two antialiased
    bilinear passes on [1, 3, H, W] FP32, each rounded and clamped to 8 bits, the floor-centred
    crop, then (x - mean) / std with the recipe's mean and std."""
    functional = torch.nn.functional
    crop = recipe.spec.crop
    width, height = resized_size(image.shape[2], image.shape[1], recipe.spec)
    x = image.unsqueeze(0).float()
    for size in ((image.shape[1], width), (height, width)):
        x = functional.interpolate(
            x, size=size, mode="bilinear", antialias=True, align_corners=False
        )
        x = x.round_().clamp_(0, 255)
    top, left = (height - crop) // 2, (width - crop) // 2
    x = x[0][:, top : top + crop, left : left + crop]
    return ((x - recipe.mean) / recipe.std).numpy()


def _hwc(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _jpeg(size: tuple[int, int], seed: int) -> bytes:
    buffer = io.BytesIO()
    make_image(*size, "RGB", seed).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _requests(*images: list[bytes]) -> list[dict[str, np.ndarray]]:
    return [{"IMAGE": np.array([[d] for d in request], np.object_)} for request in images]


# -- resize: one stack per size, today's pixels --------------------------------------------


def test_same_size_groups_keep_first_appearance_order() -> None:
    shapes = [(3, 4, 5), (3, 6, 5), (3, 4, 5), (3, 1, 1), (3, 6, 5)]
    assert same_size_groups(shapes) == [[0, 2], [1, 4], [3]]
    assert same_size_groups([]) == []


def test_batched_pixels_are_todays_per_image_pixels() -> None:
    """Every test image (every mode and format, as PIL decodes it and as the UINT8 path's
    channels-last view), twice over at equal sizes, and a contiguous CHW copy as nvJPEG
    gives: resized together, each image's pixels are byte for byte those of resizing it
    alone the old way."""
    recipe = TorchPreprocess(PreprocessSpec(), "cpu")
    arrays = [_hwc(data) for _, data in case_bytes()]
    arrays += [np.ascontiguousarray(a[::-1]) for a in arrays]  # same sizes, other pixels
    images = [recipe.from_hwc(a) for a in arrays] + [recipe.from_hwc(arrays[0]).contiguous()]
    got = recipe.pixels(images)
    expected = np.stack([_per_image_reference(recipe, image) for image in images])
    assert got.shape == (len(images), 3, 224, 224) and got.dtype == np.float32
    assert got.flags["C_CONTIGUOUS"]
    assert got.tobytes() == expected.tobytes()


def test_a_jpeg_batch_is_resized_one_stack_per_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven JPEGs of two sizes over four requests in one execute call: two interpolate calls
    per size (rows, then columns), not two per image; each request gets its own images'
    pixels in order, byte for byte the old per-image pixels."""
    model = _model(ImagePreprocessor, monkeypatch)
    sizes = [(64, 48), (50, 70), (64, 48), (64, 48), (50, 70), (64, 48), (64, 48)]
    datas = [_jpeg(size, seed) for seed, size in enumerate(sizes)]
    calls = _interpolate_calls(monkeypatch)
    results = model.process_batch(_requests(datas[:2], datas[2:3], datas[3:6], datas[6:]))

    assert calls == [5, 5, 2, 2]
    monkeypatch.undo()
    recipe = TorchPreprocess(PreprocessSpec(), "cpu")
    requests = (datas[:2], datas[2:3], datas[3:6], datas[6:])
    for request, result in zip(requests, results, strict=True):
        expected = [_per_image_reference(recipe, recipe.from_hwc(_hwc(d))) for d in request]
        assert result["PIXELS"].tobytes() == np.stack(expected).tobytes()


def test_uint8_requests_share_one_resize_per_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """UINT8 requests of two sizes, with bad ones between them, in one execute call: the
    good requests' images go through one resize per size; each bad request gets its own
    InvalidInput naming what is wrong, the good ones the pixels they get alone."""
    model = _model(RawImagePreprocessor, monkeypatch)
    rng = np.random.default_rng(3)

    def images(count: int, height: int, width: int) -> np.ndarray:
        return rng.integers(0, 256, (count, height, width, 3), dtype=np.uint8)

    good = {0: images(2, 60, 80), 1: images(1, 60, 80), 3: images(1, 40, 50), 6: images(3, 40, 50)}
    bad = {
        2: (np.zeros((1, 64, 64, 4), np.uint8), "must be RGB uint8"),
        4: (np.zeros((1, 4, 300, 3), np.uint8), "at least 8 pixels"),
        5: (np.zeros((1, 64, 64, 3), np.float32), "must be RGB uint8"),
        7: (np.zeros((0, 64, 64, 3), np.uint8), "holds no image"),
    }
    batch = [{"IMAGE_UINT8": good[i] if i in good else bad[i][0]} for i in range(8)]
    calls = _interpolate_calls(monkeypatch)
    results = model.process_batch(batch)

    assert calls == [3, 3, 4, 4]
    for index, (_, message) in bad.items():
        assert isinstance(results[index], InvalidInput) and message in str(results[index])
    monkeypatch.undo()
    recipe = TorchPreprocess(PreprocessSpec(), "cpu")
    for index, array in good.items():
        expected = np.stack([_per_image_reference(recipe, recipe.from_hwc(a)) for a in array])
        assert results[index]["PIXELS"].tobytes() == expected.tobytes()


def test_a_request_with_one_bad_image_fails_and_its_neighbours_keep_their_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JPEG request holding a good and a corrupt image fails with the corrupt one's
    error; the requests around it get their own rows of the shared batch."""
    model = _model(ImagePreprocessor, monkeypatch)
    first, second, third = (_jpeg((64, 48), seed) for seed in range(3))
    corrupt = first[:200]  # a JPEG header, no image data
    results = model.process_batch(_requests([first], [second, corrupt], [third]))
    assert isinstance(results[1], InvalidInput)
    for data, result in ((first, results[0]), (third, results[2])):
        (alone,) = model.process_batch(_requests([data]))
        assert result["PIXELS"].tobytes() == alone["PIXELS"].tobytes()


# -- PIXELS left as the recipe's tensor (pixels_on_device) --------------------------------


def _served(cls, monkeypatch: pytest.MonkeyPatch, tmp_path, **parameters: str):
    """``cls`` as Triton's stub starts it (``initialize``; pb_utils is the test stand-in,
    given a ``Tensor.from_dlpack`` that records what it is handed), on the torch path."""
    import json

    from tests.support import pb_utils_standin as standin

    utils = standin.install(monkeypatch, "triton_kit.python_models.common.base")
    handed: list = []

    def from_dlpack(name: str, value: object) -> standin.Tensor:
        handed.append(value)
        return standin.Tensor(name, np.from_dlpack(value))

    monkeypatch.setattr(utils.Tensor, "from_dlpack", staticmethod(from_dlpack), raising=False)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
    image = ("IMAGE", "TYPE_STRING", [1])
    if cls is RawImagePreprocessor:
        image = ("IMAGE_UINT8", "TYPE_UINT8", [-1, -1, 3])
    config = {
        "max_batch_size": 16,
        "input": [{"name": image[0], "data_type": image[1], "dims": image[2]}],
        "output": [{"name": "PIXELS", "data_type": "TYPE_FP32", "dims": [3, 224, 224]}],
        "parameters": {
            key: {"string_value": value}
            for key, value in {"torch_on_cpu": "true", **parameters}.items()
        },
    }
    model = cls()
    model.initialize(
        {
            "model_config": json.dumps(config),
            "model_name": cls.__name__,
            "model_repository": str(tmp_path / cls.__name__),
            "model_version": "1",
        }
    )
    return model, handed


@pytest.mark.parametrize("cls", [ImagePreprocessor, RawImagePreprocessor])
def test_pixels_on_device_hands_each_request_its_rows_through_dlpack(
    monkeypatch: pytest.MonkeyPatch, tmp_path, cls: type
) -> None:
    """Served with ``pixels_on_device: true``, each response's PIXELS go to
    ``Tensor.from_dlpack`` as that request's rows of the recipe's tensor (C-contiguous FP32),
    with the bytes the default numpy path sends; without it nothing goes that way."""
    from tests.support.pb_utils_standin import outputs, request

    datas = [_jpeg((64, 48), seed) for seed in range(3)]
    if cls is ImagePreprocessor:
        inputs = [
            {"IMAGE": np.array([[d] for d in part], np.object_)} for part in (datas[:2], datas[2:])
        ]
    else:
        inputs = [{"IMAGE_UINT8": np.stack([_hwc(d) for d in datas[:2]])}]
        inputs.append({"IMAGE_UINT8": _hwc(datas[2])[None]})
    host, nothing = _served(cls, monkeypatch, tmp_path)
    expected = [outputs(r)["PIXELS"] for r in host.execute([request(i) for i in inputs])]
    assert not nothing
    device, handed = _served(cls, monkeypatch, tmp_path, pixels_on_device="true")
    responses = device.execute([request(i) for i in inputs])

    assert [tuple(t.shape) for t in handed] == [(2, 3, 224, 224), (1, 3, 224, 224)]
    for tensor in handed:
        assert isinstance(tensor, torch.Tensor) and tensor.is_contiguous()
        assert tensor.dtype == torch.float32
    for response, pixels in zip(responses, expected, strict=True):
        assert outputs(response)["PIXELS"].tobytes() == pixels.tobytes()


def test_pixels_on_device_stays_off_in_process_and_on_the_pil_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Set up in process (``setup`` alone, as the benchmarks' in-process pipelines do), the
    torch path returns numpy PIXELS whatever the parameter says; served on the PIL path
    (no ``torch_on_cpu``, no GPU) nothing goes through DLPack."""
    model = _model(ImagePreprocessor, monkeypatch, pixels_on_device="true")
    (result,) = model.process_batch(_requests([_jpeg((64, 48), 0)]))
    assert not model.pixels_on_device and isinstance(result["PIXELS"], np.ndarray)
    served, handed = _served(
        ImagePreprocessor, monkeypatch, tmp_path, torch_on_cpu="false", pixels_on_device="true"
    )
    assert served.recipe is None and not served.pixels_on_device
    (result,) = served.process_batch(_requests([_jpeg((64, 48), 0)]))
    assert isinstance(result["PIXELS"], np.ndarray) and not handed


# -- top-k: every request's rows in one call ----------------------------------------------


def test_top_k_sorts_every_request_in_one_call(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Five requests (1, 3, 1, 2 and 1 rows) in one execute call: one softmax and sort for
    all; each response holds its own rows, equal to the request's result alone."""
    (tmp_path / "labels.txt").write_text("\n".join(f"class {i}" for i in range(10)) + "\n")
    model = TopKPostprocessor()
    model.params = ModelParameters({"top_k": "3"})
    model.version_dir = tmp_path
    model.setup()
    rng = np.random.default_rng(7)
    batch = [
        {"LOGITS": rng.standard_normal((rows, 10), dtype=np.float32)} for rows in (1, 3, 1, 2, 1)
    ]
    batch[2]["LOGITS"][:] = 0.5  # ties: the lower class id first
    alone = [model.process_one(inputs) for inputs in batch]
    calls = []
    top_k = model_module.top_k

    def counted(logits, k):
        calls.append(len(logits))
        return top_k(logits, k)

    monkeypatch.setattr(model_module, "top_k", counted)
    results = model.process_batch(batch)

    assert calls == [8]
    for result, expected in zip(results, alone, strict=True):
        assert result.keys() == expected.keys()
        for name, value in expected.items():
            assert result[name].shape == value.shape and result[name].dtype == value.dtype
            if value.dtype == np.object_:  # LABELS
                assert result[name].tolist() == value.tolist()
            else:
                assert result[name].tobytes() == value.tobytes()
    assert results[2]["CLASS_IDS"].tolist() == [[0, 1, 2]]


def test_the_execute_profile_splits_the_torch_path_into_phases(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """With an execute profile (TRITON_KIT_PROFILE_DIR), the torch path adds its phases
    (headers, decode, resize, join; upload for UINT8) to it; without one it adds nothing."""
    from triton_kit.python_models.common.base import ExecuteProfile

    jpegs = _requests([_jpeg((64, 48), 0), _jpeg((50, 70), 1)])
    for cls, batch, phases in (
        (ImagePreprocessor, jpegs, {"headers", "decode", "resize", "join"}),
        (RawImagePreprocessor, [{"IMAGE_UINT8": _hwc(_jpeg((64, 48), 0))[None]}],
         {"upload", "resize", "join"}),
    ):  # fmt: skip
        model = cls()
        model.model_name = cls.__name__
        model.profile = ExecuteProfile(tmp_path / f"{cls.__name__}.json")
        model.params = ModelParameters({"torch_on_cpu": "true"})
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
        model.setup()
        model.process_batch(batch)
        assert set(model.profile.seconds) == {f"torch.{phase}" for phase in phases}
        assert all(seconds >= 0 for seconds in model.profile.seconds.values())
    unprofiled = _model(ImagePreprocessor, monkeypatch)
    assert unprofiled.recipe.on_phase is None
