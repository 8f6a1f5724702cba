"""TorchScript served: by Triton's own pytorch backend, and with CUDA graph buckets by the
python TorchScriptModel (python_models.common.torchscript).

References are numpy expressions written here, never the backend's code. The GPU test
(CUDA graphs per batch bucket) runs on the lent H100 and skips with a reason on CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from triton_kit.build_engines.engines.torchscript import (
    TorchConfigOptions,
    torch_model_config,
    torch_model_files,
)
from triton_kit.build_engines.repository import Tensor, write_model
from triton_kit.server import ServerConfig, TritonServer

GPU = torch.cuda.is_available()


class _Affine(torch.nn.Module):
    """y = x * 2 + 1 and its row sums: one FP32 output, shapes follow the input."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x * 2 + 1
        return y, y.sum(dim=1, keepdim=True)


def _write(repo: Path, root: Path, name: str, gpu: bool, buckets: tuple[int, ...]) -> None:
    path = root / f"{name}.pt"
    torch.jit.trace(_Affine(), torch.zeros(2, 4)).save(str(path))
    options = TorchConfigOptions(
        max_batch_size=8,
        gpu=gpu,
        queue_delay_us=20000,
        graph_batch_sizes=buckets,
        graph_dims={"x": (4,)},
    )
    config = torch_model_config(
        name,
        [Tensor("x", "FP32", (-1,))],
        [Tensor("y", "FP32", (-1,)), Tensor("s", "FP32", (1,))],
        options,
    )
    write_model(repo, config, torch_model_files(path, options))


@pytest.fixture(scope="module")
def backend_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    root = tmp_path_factory.mktemp("torchrepo")
    repo = root / "repo"
    _write(repo, root, "affine_pt", gpu=False, buckets=())
    if GPU:
        _write(repo, root, "affine_pt_gpu", gpu=True, buckets=(1, 4, 8))
    config = ServerConfig(
        model_repository=repo, http_port=0, grpc_port=0, metrics_port=0, log_file=root / "log"
    )
    with TritonServer(config) as server:
        yield server


def _infer(server: TritonServer, model: str, x: np.ndarray) -> dict[str, np.ndarray]:
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.config.grpc_port}")
    tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer(model, [tensor])
    return {"y": result.as_numpy("y"), "s": result.as_numpy("s")}


def _check(out: dict[str, np.ndarray], x: np.ndarray) -> None:
    np.testing.assert_allclose(out["y"], x * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(out["s"], (x * 2 + 1).sum(axis=1, keepdims=True), rtol=1e-5)


def test_served_on_cpu_with_the_native_platform(backend_server: TritonServer) -> None:
    x = np.array([[0.5, 1.0, 2.0, -3.0]], dtype=np.float32)
    _check(_infer(backend_server, "affine_pt", x), x)
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{backend_server.config.grpc_port}")
    config = client.get_model_config("affine_pt", as_json=True)["config"]
    assert config["platform"] == "pytorch_libtorch"
    assert config["backend"] == "pytorch"
    assert config.get("runtime", "") in ("", "libtriton_pytorch.so"), "not Triton's own backend"
    assert config["instance_group"][0]["kind"] == "KIND_CPU"


def test_concurrent_mixed_shapes_each_get_their_own_rows(backend_server: TritonServer) -> None:
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1 + i % 3, 2 + i % 3), dtype=np.float32) for i in range(24)]
    with ThreadPoolExecutor(12) as pool:
        outputs = list(pool.map(lambda x: _infer(backend_server, "affine_pt", x), inputs))
    for x, out in zip(inputs, outputs, strict=True):
        _check(out, x)


def test_oversized_batch_is_rejected_and_server_stays_up(backend_server: TritonServer) -> None:
    with pytest.raises(InferenceServerException, match="batch"):
        _infer(backend_server, "affine_pt", np.zeros((9, 4), dtype=np.float32))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    _check(_infer(backend_server, "affine_pt", x), x)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU (run on the lent H100)")
def test_cuda_graph_buckets_pad_and_fall_back(backend_server: TritonServer) -> None:
    """Batches of 1..8 rows use the graphs (padded up); other inner shapes run eagerly."""
    for rows in (1, 3, 4, 7, 8):
        x = np.random.default_rng(rows).standard_normal((rows, 4), dtype=np.float32)
        _check(_infer(backend_server, "affine_pt_gpu", x), x)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)  # no graph for 5 columns
    _check(_infer(backend_server, "affine_pt_gpu", x), x)
