"""UINT8 HWC input (``resnet50_uint8``) and the torch pre-processing the GPU path runs.

References come from tests/support/reference.py (PIL and numpy, written apart from the server):
the UINT8 path must classify a decoded image exactly as the reference classifies its
encoded bytes. The torch recipe (nvJPEG + torch resize on a GPU instance) is checked here
on CPU torch against the same reference pixels, and on the GPU by the `gpu` test.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from PIL import Image
from tritonclient.utils import InferenceServerException

from tests.support.batching import first_co_batched
from tests.support.images import case_bytes, encode, jpeg
from tests.support.prerequisites import require_models
from tests.support.reference import STD_RGB, imagenet_label, reference_pixels, resnet50_reference
from triton_kit.server import TritonServer

SCORE_TOLERANCE = 1e-4
LEVEL = 1 / 255 / min(STD_RGB)  # one 8-bit level, normalised (the largest such step)
MODEL = "resnet50_uint8"


def decoded(data: bytes) -> np.ndarray:
    """What a client that decodes itself sends: RGB uint8 [height, width, 3]."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def infer(server: TritonServer, image: np.ndarray) -> grpcclient.InferResult:
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    tensor = grpcclient.InferInput("IMAGE_UINT8", list(image.shape), "UINT8")
    tensor.set_data_from_numpy(image)
    return client.infer(MODEL, [tensor])


@pytest.mark.parametrize(("name", "data"), case_bytes(), ids=[n for n, _ in case_bytes()])
def test_torch_recipe_matches_the_reference_pixels(name: str, data: bytes) -> None:
    """The GPU path's resize/crop/normalise, on CPU torch: within 2 levels, nearly all equal."""
    from triton_kit.python_models.resnet50.gpu import TorchPreprocess
    from triton_kit.python_models.resnet50.image import PreprocessSpec

    recipe = TorchPreprocess(PreprocessSpec(), "cpu")
    got = recipe.pixels([recipe.from_hwc(decoded(data))])[0]
    diff = np.abs(got - reference_pixels(data))
    assert diff.max() <= 2.05 * LEVEL, f"{name}: {diff.max() / LEVEL:.2f} levels"
    assert (diff > 0.5 * LEVEL).mean() < 0.1, f"{name}: {(diff > 0.5 * LEVEL).mean():.3f}"


def test_uint8_input_classifies_like_the_reference(
    triton_server: TritonServer, model_repository: Path
) -> None:
    require_models(MODEL, "resnet50_uint8_preprocess")
    for _, data in case_bytes():
        result = infer(triton_server, decoded(data)[None])
        ids, scores = resnet50_reference(model_repository, data)
        assert result.as_numpy("CLASS_IDS")[0].tolist() == ids.tolist()
        np.testing.assert_allclose(result.as_numpy("SCORES")[0], scores, atol=SCORE_TOLERANCE)
        labels = [label.decode() for label in result.as_numpy("LABELS")[0]]
        assert labels == [imagenet_label(i) for i in ids]


BAD_SHAPES = {
    "four-channels": (np.zeros((1, 64, 64, 4), np.uint8), "unexpected shape|IMAGE_UINT8"),
    "no-batch-dim": (np.zeros((12, 12, 3), np.uint8), "unexpected shape|IMAGE_UINT8"),
    "too-small": (np.zeros((1, 4, 300, 3), np.uint8), "at least 8 pixels"),
    "empty": (np.zeros((1, 0, 64, 3), np.uint8), "at least 8 pixels"),
}


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_bad_uint8_shapes_get_invalid_arg(triton_server: TritonServer, case: str) -> None:
    require_models(MODEL)
    image, message = BAD_SHAPES[case]
    with pytest.raises(InferenceServerException, match=message) as info:
        infer(triton_server, image)
    assert info.value.status() in ("StatusCode.INVALID_ARGUMENT", "INVALID_ARG")


def test_a_bad_image_fails_alone_in_a_shared_batch(triton_server: TritonServer) -> None:
    require_models(MODEL)
    good = decoded(jpeg())[None]
    images = [good if i % 4 else BAD_SHAPES["too-small"][0] for i in range(16)]

    def call(image: np.ndarray) -> object:
        try:
            return infer(triton_server, image).as_numpy("CLASS_IDS")[0].tolist()
        except InferenceServerException as exc:
            return exc

    def send_all() -> list:
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(call, images))

    url = triton_server.grpc_url
    results = first_co_batched(url, "resnet50_uint8_preprocess", len(images), send_all)
    first_good = results[1]
    for i, result in enumerate(results):
        if i % 4:
            assert result == first_good
        else:
            assert isinstance(result, InferenceServerException)
            assert "at least 8 pixels" in str(result)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the lent H100)")
def test_nvjpeg_decode_and_gpu_resize_match_the_reference() -> None:
    """Two checks, so that decoder differences do not hide a recipe bug.

    nvJPEG's IDCT and chroma upsampling differ from libjpeg's: on the noisy test images the
    99th percentile of the end-to-end difference reached 13.9 levels on the H100 (run 4)
    and the decoded pixels differ by 4.32 levels on average (run 5, 320x240 RGB), so the
    decode is bounded on average only (6 levels); the GPU resize/crop/normalise is then
    held to the CPU recipe's 2 levels against the reference run on the very pixels nvJPEG
    decoded (run 5 stopped at the decode bound of 2; passed on the H100 in issue 30's call 16,
    benchmarks/results/gpu/issue30-pipelines/call16-nvjpeg-pytest.log).
    """
    from triton_kit.python_models.resnet50.gpu import TorchPreprocess
    from triton_kit.python_models.resnet50.image import PreprocessSpec

    recipe = TorchPreprocess(PreprocessSpec(), "cuda")
    for name, data in case_bytes():
        if not data.startswith(b"\xff\xd8"):
            continue
        image = recipe.decode_jpegs([data])[0]
        hwc = image.permute(1, 2, 0).cpu().numpy()
        decode_diff = np.abs(hwc.astype(np.int16) - decoded(data).astype(np.int16))
        assert decode_diff.mean() <= 6.0, f"{name}: decode mean {decode_diff.mean():.2f} levels"
        lossless = io.BytesIO()
        Image.fromarray(hwc).save(lossless, format="PNG")
        diff = np.abs(recipe.pixels([image])[0] - reference_pixels(lossless.getvalue()))
        assert diff.max() <= 2.05 * LEVEL, f"{name}: {diff.max() / LEVEL:.2f} levels"
        assert (diff > 0.5 * LEVEL).mean() < 0.1, f"{name}: {(diff > 0.5 * LEVEL).mean():.3f}"


def _serve_torch_path(
    model_repository: Path, root: Path, models: tuple[str, ...], **parameters: str
) -> Iterator[str]:
    """``models`` as shipped, with ``torch_on_cpu`` (the GPU path's code on CPU) and
    ``parameters`` set, served alone; yields the gRPC URL."""
    from triton_kit.build_engines.repository import parse, render
    from triton_kit.server import ServerConfig

    require_models(*models)
    for name in models:
        target = root / "repo" / name
        shutil.copytree(model_repository / name, target)
        config = parse((target / "config.pbtxt").read_text())
        for key, value in {"torch_on_cpu": "true", **parameters}.items():
            config.parameters[key].string_value = value
        (target / "config.pbtxt").write_text(render(config))
    server_config = ServerConfig(
        model_repository=root / "repo", http_port=0, grpc_port=0, metrics_port=0,
        log_file=root / "tritonserver.log",
    )  # fmt: skip
    with TritonServer(server_config) as server:
        yield server.grpc_url


@pytest.fixture(scope="module")
def torch_path_server(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The shipped resnet50_preprocess with ``torch_on_cpu``: the GPU path's code on CPU."""
    root = tmp_path_factory.mktemp("torchpre")
    yield from _serve_torch_path(model_repository, root, ("resnet50_preprocess",))


@pytest.fixture(scope="module")
def device_pixels_server(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Both pre-processors on the torch path with ``pixels_on_device``: PIXELS leave the
    stub through the real ``pb_utils.Tensor.from_dlpack`` (CPU tensors here; device memory on
    a GPU instance)."""
    root = tmp_path_factory.mktemp("devicepix")
    models = ("resnet50_preprocess", "resnet50_uint8_preprocess")
    yield from _serve_torch_path(model_repository, root, models, pixels_on_device="true")


def _pixels(url: str, data: bytes) -> np.ndarray | InferenceServerException:
    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    tensor = grpcclient.InferInput("IMAGE", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[data]], dtype=np.object_))
    try:
        return client.infer("resnet50_preprocess", [tensor]).as_numpy("PIXELS")[0]
    except InferenceServerException as exc:
        return exc


def test_torch_path_batches_images_and_fails_bad_ones_alone(torch_path_server: str) -> None:
    """Every image of an execute call decoded/resized together (within the decode pixel
    budget); each request gets its own pixels (within 2 levels of the reference); bad images,
    one over the 40 MP limit among them, get their own INVALID_ARG."""
    good = case_bytes()
    over_limit = encode(Image.new("L", (8000, 6000)), "PNG")  # 48 MP, ~150 kB
    bad = {
        b"": "empty",
        b"not an image at all": "not a decodable image",
        over_limit: "the limit is 40000000 pixels",
    }
    calls = [data for _, data in good] + list(bad)

    def send_all() -> list:
        with ThreadPoolExecutor(len(calls)) as pool:
            return list(pool.map(lambda d: _pixels(torch_path_server, d), calls))

    results = first_co_batched(torch_path_server, "resnet50_preprocess", len(calls), send_all)
    worst = []
    for (name, data), got in zip(good, results, strict=False):
        assert isinstance(got, np.ndarray), f"{name}: {got}"
        worst.append(np.abs(got - reference_pixels(data)).max() / LEVEL)
        assert worst[-1] <= 2.05, f"{name}: {worst[-1]:.2f} levels"
    # PIL's path matches the reference to float rounding; torch's differs by a level here
    # and there: proof that the torch path, not a silent fallback to PIL, served them.
    assert max(worst) >= 0.5, worst
    for (data, message), got in zip(bad.items(), results[len(good) :], strict=True):
        assert isinstance(got, InferenceServerException) and message in str(got), data
        assert got.status() == "StatusCode.INVALID_ARGUMENT"


def _uint8_pixels(url: str, images: np.ndarray) -> np.ndarray | InferenceServerException:
    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    tensor = grpcclient.InferInput("IMAGE_UINT8", list(images.shape), "UINT8")
    tensor.set_data_from_numpy(images)
    try:
        return client.infer("resnet50_uint8_preprocess", [tensor]).as_numpy("PIXELS")
    except InferenceServerException as exc:
        return exc


def test_pixels_through_dlpack_are_each_requests_own_rows(device_pixels_server: str) -> None:
    """JPEG and PNG requests sharing an execute call, PIXELS handed to the stub as views of
    one batch tensor through from_dlpack: each response holds its own image's pixels (within
    2 levels of the reference, as the numpy path), bad images their own INVALID_ARG."""
    good = case_bytes()
    bad = {b"": "empty", b"not an image at all": "not a decodable image"}
    calls = [data for _, data in good] + list(bad)

    def send_all() -> list:
        with ThreadPoolExecutor(len(calls)) as pool:
            return list(pool.map(lambda d: _pixels(device_pixels_server, d), calls))

    results = first_co_batched(device_pixels_server, "resnet50_preprocess", len(calls), send_all)
    for (name, data), got in zip(good, results, strict=False):
        assert isinstance(got, np.ndarray), f"{name}: {got}"
        worst = np.abs(got - reference_pixels(data)).max() / LEVEL
        assert worst <= 2.05, f"{name}: {worst:.2f} levels"
    for (data, message), got in zip(bad.items(), results[len(good) :], strict=True):
        assert isinstance(got, InferenceServerException) and message in str(got), data
        assert got.status() == "StatusCode.INVALID_ARGUMENT"


def test_uint8_requests_batched_through_dlpack_get_their_own_rows(
    device_pixels_server: str,
) -> None:
    """UINT8 requests of one size holding 1, 2 and 1 images (Triton batches only equal
    shapes), and a bad one, sent together: the torch path resizes the shared execute call's
    images together and each request gets its own images' pixels (within 2 levels of the
    reference); the bad one its own INVALID_ARG."""
    first, second = (decoded(data) for _, data in case_bytes()[:2])
    requests = [first[None], np.stack([first[::-1], first[:, ::-1]]), first[None]]
    requests += [np.zeros((1, 4, 300, 3), np.uint8), second[None]]
    url = device_pixels_server

    def send_all() -> list:
        with ThreadPoolExecutor(len(requests)) as pool:
            return list(pool.map(lambda images: _uint8_pixels(url, images), requests))

    results = first_co_batched(url, "resnet50_uint8_preprocess", len(requests), send_all)
    bad = results.pop(3)
    assert isinstance(bad, InferenceServerException) and "at least 8 pixels" in str(bad)
    assert bad.status() == "StatusCode.INVALID_ARGUMENT"
    for images, got in zip(requests[:3] + requests[4:], results, strict=True):
        assert isinstance(got, np.ndarray) and got.shape == (len(images), 3, 224, 224), got
        for image, pixels in zip(images, got, strict=True):
            lossless = io.BytesIO()
            Image.fromarray(np.ascontiguousarray(image)).save(lossless, format="PNG")
            worst = np.abs(pixels - reference_pixels(lossless.getvalue())).max() / LEVEL
            assert worst <= 2.05, f"{worst:.2f} levels"
