"""ResNet-50 built with ``--engine aoti`` and served by the kit's own launcher (issue 30).

``resnet50_model`` is an AOTInductor package served by the opt-in ``pytorch_aoti`` backend
(``python -m triton_kit.server.native_backends build pytorch_aoti``, built once and reused).
The reference is ONNX Runtime on the build's own verified ONNX: concurrent one-image
requests, batched together by Triton, must each get their own image's logits (the PT2 path
once gave every response the whole batch), and the encoded-image ensemble must classify as
tests/support/reference.py does.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient

from tests.support.aoti import build_resnet50_aoti, built_aoti_backend, model_stats_after
from tests.support.images import case_bytes
from tests.support.reference import resnet50_reference
from triton_kit.client import TritonClient
from triton_kit.server import ServerConfig, TritonServer

REQUESTS = 6
SCORE_TOLERANCE = 1e-4
# The backend build (~2 min alone), a ResNet-50 export and Inductor compile, a server start.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    built_aoti_backend()
    root = tmp_path_factory.mktemp("aotir50")
    repo, onnx = build_resnet50_aoti(root)
    reference = root / "reference" / "resnet50_model" / "1"
    reference.mkdir(parents=True)
    (reference / "model.onnx").symlink_to(onnx)
    return repo, root / "reference"


@pytest.fixture(scope="module")
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("aotir50-log") / "tritonserver.log"
    config = ServerConfig(
        model_repository=built[0], http_port=0, grpc_port=0, metrics_port=0, log_file=log
    )
    with TritonServer(config) as running:
        yield running.grpc_url.removeprefix("grpc://")


def _one_image(url: str, pixels: np.ndarray) -> np.ndarray:
    client = grpcclient.InferenceServerClient(url)
    tensor = grpcclient.InferInput("INPUT__0", [1, *pixels.shape], "FP32")
    tensor.set_data_from_numpy(pixels[None])
    return client.infer("resnet50_model", [tensor], client_timeout=300).as_numpy("OUTPUT__0")


def test_batched_requests_get_their_own_logits(server: str, built: tuple[Path, Path]) -> None:
    pixels = np.random.default_rng(7).standard_normal((REQUESTS, 3, 224, 224), np.float32)
    with ThreadPoolExecutor(REQUESTS) as pool:
        got = list(pool.map(lambda p: _one_image(server, p), pixels))
    model = model_stats_after(server, "resnet50_model", REQUESTS)
    assert model.inference_count >= REQUESTS
    assert model.execution_count < model.inference_count, "nothing was batched: proves nothing"
    assert [y.shape for y in got] == [(1, 1000)] * REQUESTS
    session = ort.InferenceSession(
        str(built[1] / "resnet50_model" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    (expected,) = session.run(None, {"pixel_values": pixels})
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(np.concatenate(got), expected, rtol=0, atol=1e-3 * scale)


def test_encoded_images_classify_like_the_onnx_reference(
    server: str, built: tuple[Path, Path]
) -> None:
    with TritonClient(f"grpc://{server}", timeout=300) as client:
        for name, data in case_bytes()[:4]:
            result = client.classify(data)
            ids, scores = resnet50_reference(built[1], data)
            assert result.class_ids == ids.tolist(), name
            np.testing.assert_allclose(result.scores, scores, atol=SCORE_TOLERANCE, err_msg=name)
