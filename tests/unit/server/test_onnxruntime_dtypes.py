"""The python ``onnxruntime`` backend casts each input to the dtype its graph declares.

A one-input ONNX graph per element type (``Y = Cast(X, double)``) is written here with
onnx.helper; the request sends float64 and the expected values are worked by hand
(0.1 is 0.0999755859375 in float16, 2.75 truncates to 2 in every integer type). The model
object is set up as tests/unit/server/test_onnxruntime_backend.py sets it up, without the
python stub.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.unit.server.test_onnxruntime_backend import _model


def _cast_graph(path: Path, x_type: int) -> None:
    x = helper.make_tensor_value_info("X", x_type, ["N", "W"])
    y = helper.make_tensor_value_info("Y", TensorProto.DOUBLE, ["N", "W"])
    node = helper.make_node("Cast", ["X"], ["Y"], to=TensorProto.DOUBLE)
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 11)]
    )
    model.ir_version = 7
    onnx.save(model, str(path))


@pytest.mark.parametrize(
    ("x_type", "numpy_type", "given", "expected"),
    [
        (TensorProto.FLOAT, np.float32, [0.1, -2.5], [0.10000000149011612, -2.5]),
        (TensorProto.FLOAT16, np.float16, [0.1, -2.5], [0.0999755859375, -2.5]),
        (TensorProto.DOUBLE, np.float64, [0.1, -2.5], [0.1, -2.5]),
        (TensorProto.INT64, np.int64, [2.75, -3.0], [2.0, -3.0]),
        (TensorProto.INT32, np.int32, [2.75, -3.0], [2.0, -3.0]),
        (TensorProto.INT16, np.int16, [2.75, -3.0], [2.0, -3.0]),
        (TensorProto.INT8, np.int8, [2.75, -3.0], [2.0, -3.0]),
        (TensorProto.UINT8, np.uint8, [2.75, 200.0], [2.0, 200.0]),
        (TensorProto.BOOL, np.bool_, [0.0, 3.0], [0.0, 1.0]),
    ],
)
def test_each_graph_dtype_is_read_and_fed(
    tmp_path: Path, x_type: int, numpy_type: type, given: list, expected: list
) -> None:
    _cast_graph(tmp_path / "model.onnx", x_type)
    model = _model(tmp_path, inputs=["X"])
    model.output_dtypes = {"Y": np.dtype(np.float64)}
    model.output_names = ["Y"]
    assert model.onnx_input_dtypes == {"X": numpy_type}
    (result,) = model.process_batch([{"X": np.array([given], dtype=np.float64)}])
    assert result["Y"].tolist() == [expected]


def test_an_unmapped_graph_dtype_is_fed_as_float32_and_that_request_fails(
    tmp_path: Path,
) -> None:
    _cast_graph(tmp_path / "model.onnx", TensorProto.UINT16)
    model = _model(tmp_path, inputs=["X"])
    model.output_names = ["Y"]
    assert model.onnx_input_dtypes == {"X": np.float32}
    (result,) = model.process_batch([{"X": np.array([[1.0]], dtype=np.float64)}])
    assert isinstance(result, Exception) and "tensor(float)" in str(result)
