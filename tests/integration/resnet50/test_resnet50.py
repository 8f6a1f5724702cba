"""ResNet-50 through the real server equals the in-process pipeline, on every protocol and style."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.images import case_bytes
from tests.support.prerequisites import require_models
from tests.support.reference import imagenet_label, resnet50_reference
from triton_kit.client import AsyncTritonClient, Classification, TritonClient

CASES = case_bytes()
SCORE_TOLERANCE = 1e-4


@pytest.fixture(scope="module", autouse=True)
def _models() -> None:
    require_models("resnet50", "resnet50_preprocess", "resnet50_model", "resnet50_postprocess")


def assert_matches_reference(result: Classification, repository: Path, data: bytes) -> None:
    ids, scores = resnet50_reference(repository, data)
    assert result.class_ids == ids.tolist()
    np.testing.assert_allclose(result.scores, scores, rtol=0, atol=SCORE_TOLERANCE)
    assert result.scores == sorted(result.scores, reverse=True)
    assert [p.label for p in result.predictions] == [imagenet_label(i) for i in ids]


def test_cases_cover_modes_formats_and_sizes() -> None:
    images = [Image.open(io.BytesIO(data)) for _, data in CASES]
    assert len(CASES) >= 10
    assert {im.format for im in images} == {"JPEG", "PNG", "WEBP"}
    assert {"RGB", "RGBA", "L", "P"} <= {im.mode for im in images}
    assert len({im.size for im in images}) >= 10


def test_classify_matches_in_process_pipeline(
    triton_client: TritonClient, model_repository: Path
) -> None:
    for name, data in CASES:
        result = triton_client.classify(data)
        assert len(result.predictions) == 5, name
        assert_matches_reference(result, model_repository, data)


def test_classify_batch_matches_single_requests(
    triton_client: TritonClient, model_repository: Path
) -> None:
    results = triton_client.classify_batch([data for _, data in CASES])
    for (_, data), result in zip(CASES, results, strict=True):
        assert_matches_reference(result, model_repository, data)


async def test_async_classify_batch_matches(
    async_triton_client: AsyncTritonClient, model_repository: Path
) -> None:
    results = await async_triton_client.classify_batch([data for _, data in CASES])
    for (_, data), result in zip(CASES, results, strict=True):
        assert_matches_reference(result, model_repository, data)


def test_accepts_path_and_pil_image(
    triton_client: TritonClient, model_repository: Path, tmp_path: Path
) -> None:
    _, data = CASES[1]  # lossless PNG: a PIL round trip keeps the pixels
    path = tmp_path / "image.png"
    path.write_bytes(data)
    from_path = triton_client.classify(path, top_k=3)
    from_pil = triton_client.classify(Image.open(io.BytesIO(data)), top_k=3)
    assert len(from_path.predictions) == 3
    assert from_path == from_pil
    assert from_path.class_ids == resnet50_reference(model_repository, data)[0][:3].tolist()


def test_top_k_out_of_range_is_refused_before_sending(triton_client: TritonClient) -> None:
    with pytest.raises(ValueError, match="top_k"):
        triton_client.classify(CASES[0][1], top_k=6)


def test_labels_are_imagenet_names_by_id(triton_client: TritonClient) -> None:
    """Every served label is the ImageNet-1k name of its own id (an off-by-one shifts them)."""
    for _, data in CASES[:4]:
        for prediction in triton_client.classify(data).predictions:
            assert prediction.label == imagenet_label(prediction.class_id), prediction


def test_reference_preprocessing_uses_rgb_order_of_the_constants() -> None:
    """A flat mid-grey image normalises to the known per-channel values, R then G then B."""
    from tests.support.images import encode
    from tests.support.reference import reference_pixels

    grey = encode(Image.new("RGB", (300, 300), (128, 128, 128)), "PNG")
    pixels = reference_pixels(grey)
    expected = [(128 / 255 - m) / s for m, s in [(0.485, 0.229), (0.456, 0.224), (0.406, 0.225)]]
    np.testing.assert_allclose(pixels[:, 100, 100], expected, rtol=1e-6)


def test_metadata_and_readiness(triton_client: TritonClient) -> None:
    triton_client.wait_until_ready(timeout=10, models=["resnet50"])
    metadata = triton_client.model_metadata("resnet50")
    assert [i["name"] for i in metadata["inputs"]] == ["IMAGE"]
    assert {o["name"] for o in metadata["outputs"]} == {"CLASS_IDS", "SCORES", "LABELS"}
