"""The python ``onnxruntime`` backend's own code, driven without Triton (fast: mutation runs).

A two-input ONNX graph is written here with onnx.helper (Y = X * 2 + B, S = sum of X over
its last axis); expected outputs are computed with numpy. The model object is set up as
``initialize`` would set it up from config.pbtxt, without the python stub.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from python_models.common.base import InvalidInput
from python_models.common.parameters import ModelParameters
from server.backends.onnxruntime.model import TritonPythonModel


def _graph(path: Path, x_type=TensorProto.FLOAT, batch: bool = True) -> None:
    dims = ["N", "W"] if batch else ["W"]
    x = helper.make_tensor_value_info("X", x_type, dims)
    b = helper.make_tensor_value_info("B", TensorProto.INT64, dims)
    y = helper.make_tensor_value_info("Y", TensorProto.DOUBLE, dims)
    s = helper.make_tensor_value_info("S", TensorProto.DOUBLE, ["N"] if batch else [])
    two = helper.make_tensor("two", TensorProto.DOUBLE, [], [2.0])
    nodes = [
        helper.make_node("Cast", ["X"], ["Xd"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["B"], ["Bd"], to=TensorProto.DOUBLE),
        helper.make_node("Mul", ["Xd", "two"], ["X2"]),
        helper.make_node("Add", ["X2", "Bd"], ["Y"]),
        helper.make_node("ReduceSum", ["Xd"], ["S"], keepdims=0, axes=[-1]),
    ]
    graph = helper.make_graph(nodes, "g", [x, b], [y, s], initializer=[two])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, str(path))


def _model(version_dir: Path, max_batch_size: int = 8, **config) -> TritonPythonModel:
    model = TritonPythonModel()
    model.model_config = {"max_batch_size": max_batch_size, **config}
    model.model_name = "toy"
    model.version_dir = version_dir
    model.params = ModelParameters(config.get("params", {}))
    model.max_batch_size = max_batch_size
    model.input_names = config.get("inputs", ["X", "B"])
    model.optional_inputs = set()
    model.output_dtypes = {"Y": np.dtype(np.float64), "S": np.dtype(np.float64)}
    model.setup()
    return model


def _request(x: list, b: list, x_dtype=np.float32) -> dict[str, np.ndarray]:
    return {"X": np.array(x, dtype=x_dtype), "B": np.array(b, dtype=np.int64)}


def test_setup_reads_the_file_dtypes_and_session_options(tmp_path: Path) -> None:
    _graph(tmp_path / "model.onnx", x_type=TensorProto.FLOAT16)
    params = {"intra_op_thread_count": "2", "inter_op_thread_count": "1"}
    model = _model(tmp_path, params=params)
    assert model.onnx_input_dtypes == {"X": np.float16, "B": np.int64}
    assert model.output_names == ["Y", "S"]
    options = model.session.get_session_options()
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1


def test_default_model_filename(tmp_path: Path) -> None:
    _graph(tmp_path / "other.onnx")
    assert _model(tmp_path, default_model_filename="other.onnx").session is not None
    with pytest.raises(FileNotFoundError) as caught:
        _model(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'model.onnx'} not found; build it with `python -m build_engines`"
    )


def test_config_inputs_must_exist_in_the_graph(tmp_path: Path) -> None:
    _graph(tmp_path / "model.onnx")
    with pytest.raises(ValueError) as caught:
        _model(tmp_path, inputs=["X", "B", "Z", "A"])
    assert str(caught.value) == "config inputs ['A', 'Z'] are not inputs of model.onnx"


def test_requests_of_one_shape_run_together_and_split_back(tmp_path: Path) -> None:
    _graph(tmp_path / "model.onnx")
    model = _model(tmp_path)
    calls = []
    run = model.session.run
    model.session = type("Counting", (), {})()
    model.session.run = lambda names, feed: calls.append(feed["X"].shape) or run(names, feed)
    batch = [
        _request([[1, 2]], [[10, 20]]),
        _request([[3, 4], [5, 6]], [[0, 0], [1, 1]], x_dtype=np.float64),  # cast to float32
        _request([[1, 1, 1]], [[0, 0, 0]]),  # another width: its own call
    ]
    results = model.process_batch(batch)
    assert sorted(calls) == [(1, 3), (3, 2)]
    np.testing.assert_array_equal(results[0]["Y"], [[12.0, 24.0]])
    np.testing.assert_array_equal(results[0]["S"], [3.0])
    np.testing.assert_array_equal(results[1]["Y"], [[6.0, 8.0], [11.0, 13.0]])
    np.testing.assert_array_equal(results[1]["S"], [7.0, 11.0])
    np.testing.assert_array_equal(results[2]["Y"], [[2.0, 2.0, 2.0]])
    assert set(results[2]) == {"Y", "S"}


def test_a_failing_group_fails_alone(tmp_path: Path) -> None:
    _graph(tmp_path / "model.onnx")
    model = _model(tmp_path)
    batch = [
        _request([[1, 2]], [[1, 1]]),
        {"X": np.ones((1, 3), np.float32), "B": np.ones((1, 2), np.int64)},  # X and B disagree
        _request([[4, 4]], [[0, 0]]),
    ]
    results = model.process_batch(batch)
    assert isinstance(results[1], Exception) and not isinstance(results[1], InvalidInput)
    np.testing.assert_array_equal(results[0]["Y"], [[3.0, 5.0]])
    np.testing.assert_array_equal(results[2]["Y"], [[8.0, 8.0]])


def test_unbatched_model_runs_each_request_alone(tmp_path: Path) -> None:
    _graph(tmp_path / "model.onnx", batch=False)
    model = _model(tmp_path, max_batch_size=0)
    results = model.process_batch([_request([1, 2], [0, 1]), _request([3, 3], [1, 1])])
    np.testing.assert_array_equal(results[0]["Y"], [2.0, 5.0])
    assert results[0]["S"] == 3.0
    np.testing.assert_array_equal(results[1]["Y"], [7.0, 7.0])
    bad = model.process_batch([_request([1, 2], [0, 1, 2])])
    assert isinstance(bad[0], Exception)


def test_outputs_follow_the_config_order_and_three_requests_split(tmp_path: Path) -> None:
    _graph(tmp_path / "model.onnx")
    model = _model(tmp_path)
    model.output_dtypes = {"S": np.dtype(np.float64), "Y": np.dtype(np.float64)}
    model.output_names = list(model.output_dtypes)  # config order differs from the graph's
    batch = [
        _request([[1, 0]], [[0, 0]]),
        _request([[0, 2]], [[1, 1]]),
        _request([[3, 3]], [[0, 5]]),
    ]
    results = model.process_batch(batch)
    assert [r["S"].tolist() for r in results] == [[1.0], [2.0], [6.0]]
    assert [r["Y"].tolist() for r in results] == [[[2.0, 0.0]], [[1.0, 5.0]], [[6.0, 11.0]]]
