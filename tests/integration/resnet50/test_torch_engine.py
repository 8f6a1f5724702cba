"""ResNet-50 built with ``--engine torch``: served classes match the ONNX path (issue 10).

The build writes TorchScript ``resnet50_model/1/model.pt`` (``pytorch_libtorch``), served by
the project's pytorch backend. The reference is tests/support/reference.py (PIL + numpy recipe) on
the build's own verified ONNX, for encoded images (``resnet50``) and decoded UINT8 ones
(``resnet50_uint8``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from PIL import Image

from tests.support.images import case_bytes
from tests.support.reference import resnet50_reference
from triton_kit.client import InvalidInputError, TritonClient
from triton_kit.server import ServerConfig, TritonServer

SCORE_TOLERANCE = 1e-4
# A ResNet-50 build and a server start: minutes on 2 shared cores (4 min measured).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(served repository, a repository-shaped folder with the build's ONNX for the reference)."""
    from triton_kit.build_engines.cli import build_from_argv

    root = tmp_path_factory.mktemp("torchr50")
    argv = ["resnet50", "--engine", "torch", "--output-repository", str(root / "repo")]
    build_from_argv([*argv, "--work-dir", str(root / "work")])
    reference = root / "reference" / "resnet50_model" / "1"
    reference.mkdir(parents=True)
    (reference / "model.onnx").symlink_to(root / "work" / "resnet50" / "model.onnx")
    return root / "repo", root / "reference"


@pytest.fixture(scope="module")
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("torchr50-log") / "tritonserver.log"
    config = ServerConfig(
        model_repository=built[0], http_port=0, grpc_port=0, metrics_port=0, log_file=log
    )
    with TritonServer(config) as running:
        yield running.grpc_url


def test_repository_serves_torchscript(built: tuple[Path, Path]) -> None:
    from triton_kit.build_engines.repository import parse

    model = built[0] / "resnet50_model"
    config = parse((model / "config.pbtxt").read_text())
    assert config.platform == "pytorch_libtorch"
    group = config.instance_group[0]
    assert group.kind == (group.KIND_GPU if torch.cuda.is_available() else group.KIND_CPU)
    assert (model / "1" / "model.pt").is_file() and not (model / "1" / "model.onnx").exists()


def test_encoded_images_classify_like_the_onnx_reference(
    server: str, built: tuple[Path, Path]
) -> None:
    with TritonClient(server, timeout=120) as client:
        for name, data in case_bytes():
            result = client.classify(data)
            ids, scores = resnet50_reference(built[1], data)
            assert result.class_ids == ids.tolist(), name
            np.testing.assert_allclose(result.scores, scores, atol=SCORE_TOLERANCE, err_msg=name)


def test_uint8_images_classify_like_the_onnx_reference(
    server: str, built: tuple[Path, Path]
) -> None:
    client = grpcclient.InferenceServerClient(server.removeprefix("grpc://"))
    for name, data in case_bytes()[:6]:
        image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))[None]
        tensor = grpcclient.InferInput("IMAGE_UINT8", list(image.shape), "UINT8")
        tensor.set_data_from_numpy(image)
        result = client.infer("resnet50_uint8", [tensor])
        ids, scores = resnet50_reference(built[1], data)
        assert result.as_numpy("CLASS_IDS")[0].tolist() == ids.tolist(), name
        np.testing.assert_allclose(result.as_numpy("SCORES")[0], scores, atol=SCORE_TOLERANCE)


def test_bad_image_gets_the_same_clear_error(server: str) -> None:
    with TritonClient(server, timeout=120) as client:
        with pytest.raises(InvalidInputError, match="not a decodable image"):
            client.classify(b"definitely not an image" * 10)
        assert len(client.classify(case_bytes()[0][1]).class_ids) == 5
