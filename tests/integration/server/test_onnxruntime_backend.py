"""Triton's own onnxruntime backend, as the embedded server runs it, honours config.pbtxt."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper

from tests.support.batching import co_batched
from triton_kit.build_engines.repository import Tensor, onnx_model_config, write_model
from triton_kit.server import ServerConfig, TritonServer


def _affine_onnx(path: Path) -> Path:
    """y = x * 2 + 1 (FP32 [batch, n]); ids = cast(x) (INT64): two outputs, two dtypes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n"])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "n"])
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["doubled"]),
        helper.make_node("Add", ["doubled", "one"], ["y"]),
        helper.make_node("Cast", ["x"], ["ids"], to=TensorProto.INT64),
    ]
    initializers = [
        helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
    ]
    graph = helper.make_graph(nodes, "affine", [x], [y, ids], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def backend_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    root = tmp_path_factory.mktemp("ortrepo")
    onnx_path = _affine_onnx(root / "affine.onnx")
    io = ([Tensor("x", "FP32", (-1,))], [Tensor("y", "FP32", (-1,)), Tensor("ids", "INT64", (-1,))])
    batched = onnx_model_config(
        "affine", *io, max_batch_size=8, instances=2, threads=1, dynamic_batching_delay_us=20000
    )
    unbatched = onnx_model_config(
        "affine_nobatch",
        [Tensor("x", "FP32", (-1, -1))],
        [Tensor("y", "FP32", (-1, -1)), Tensor("ids", "INT64", (-1, -1))],
        max_batch_size=0,
    )
    # Same graph, different intra-op thread counts: their stubs' thread counts must differ.
    one_thread = onnx_model_config("affine_t1", *io, max_batch_size=8, threads=1)
    five_threads = onnx_model_config("affine_t5", *io, max_batch_size=8, threads=5)
    repo = root / "repo"
    for config in (batched, unbatched, one_thread, five_threads):
        write_model(repo, config, {"model.onnx": onnx_path})
    config = ServerConfig(
        model_repository=repo,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=root / "server.log",
    )
    with TritonServer(config) as server:
        yield server


def _infer(server: TritonServer, model: str, x: np.ndarray) -> dict[str, np.ndarray]:
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.config.grpc_port}")
    tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer(model, [tensor])
    return {"y": result.as_numpy("y"), "ids": result.as_numpy("ids")}


def test_outputs_and_dtypes(backend_server: TritonServer) -> None:
    x = np.array([[0.5, 1.0, 2.0]], dtype=np.float32)
    out = _infer(backend_server, "affine", x)
    np.testing.assert_array_equal(out["y"], x * 2 + 1)
    assert out["ids"].dtype == np.int64
    np.testing.assert_array_equal(out["ids"], [[0, 1, 2]])


def test_concurrent_requests_of_mixed_shapes_each_get_their_own_rows(
    backend_server: TritonServer,
) -> None:
    """Requests are batched when shapes agree and kept apart when they don't.

    Twelve clients, connected beforehand, send together (a barrier): under CI load, clients
    that each opened a channel per call arrived too far apart to share one execute.
    """
    url = f"127.0.0.1:{backend_server.config.grpc_port}"
    inputs = [np.full((1 + i % 3, 2 + i % 2), i, dtype=np.float32) for i in range(24)]
    clients = [grpcclient.InferenceServerClient(url) for _ in range(12)]
    together = threading.Barrier(len(clients))

    def send(worker: int) -> list[np.ndarray]:
        together.wait(timeout=30)
        outputs = []
        for x in inputs[worker::12]:
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            outputs.append(clients[worker].infer("affine", [tensor]).as_numpy("y"))
        return outputs

    pool = ThreadPoolExecutor(len(clients))
    with co_batched(f"grpc://{url}", "affine", len(inputs)), pool:
        results = list(pool.map(send, range(len(clients))))
    for worker, outputs in enumerate(results):
        for x, y in zip(inputs[worker::12], outputs, strict=True):
            np.testing.assert_array_equal(y, x * 2 + 1)
    for client in clients:
        client.close()


def test_unbatched_model_runs_whole_tensors(backend_server: TritonServer) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(_infer(backend_server, "affine_nobatch", x)["y"], x * 2 + 1)


def test_instance_count_and_threads_come_from_the_config(backend_server: TritonServer) -> None:
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{backend_server.config.grpc_port}")
    config = client.get_model_config("affine", as_json=True)["config"]
    assert config["instance_group"][0]["count"] == 2
    assert config["parameters"]["intra_op_thread_count"]["string_value"] == "1"
    log = backend_server.read_log()
    assert "affine_0_0" in log and "affine_0_1" in log, "expected two model instances"


def _threads_added_by_loading(server: TritonServer, model: str) -> int:
    """Threads the tritonserver process gains when ``model`` is loaded (observed, not
    configured): Triton's own backend runs ONNX Runtime inside the server process."""
    import psutil

    from triton_kit.server.security import api_key_headers

    process = psutil.Process(server._process.pid)
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.config.grpc_port}")
    headers = api_key_headers(server.api_key, "grpc")
    client.unload_model(model, headers=headers)
    before = _settled_threads(process)
    client.load_model(model, headers=headers)
    _infer(server, model, np.ones((1, 2), dtype=np.float32))
    return _settled_threads(process) - before


def _settled_threads(process: object, deadline_s: float = 15.0) -> int:
    """The thread count once it has held still for half a second (an unload finishes, and
    its threads exit, after the call returns)."""
    readings: list[int] = []
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        readings.append(process.num_threads())  # type: ignore[attr-defined]
        if len(readings) >= 6 and len(set(readings[-6:])) == 1:
            return readings[-1]
        time.sleep(0.1)
    raise AssertionError(f"thread count never settled: {readings[-20:]}")


def test_session_applies_the_intra_op_thread_count(backend_server: TritonServer) -> None:
    """ONNX Runtime starts intra_op_num_threads - 1 pool threads: 5 threads -> 4 more than 1."""
    x = np.ones((1, 2), dtype=np.float32)
    for model in ("affine_t1", "affine_t5"):
        np.testing.assert_array_equal(_infer(backend_server, model, x)["y"], x * 2 + 1)
    extra = _threads_added_by_loading(backend_server, "affine_t5") - _threads_added_by_loading(
        backend_server, "affine_t1"
    )
    assert extra == 4


def test_oversized_batch_is_rejected(backend_server: TritonServer) -> None:
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException, match="batch"):
        _infer(backend_server, "affine", np.zeros((9, 2), dtype=np.float32))
