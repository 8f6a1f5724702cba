"""Precision lowering on the ONNX graph: FP16 casts and INT8 Q/DQ nodes.

TensorRT 11 removed the FP16/INT8 builder flags and calibrators, so precision
lives in the graph itself; ONNX Runtime runs the same graphs on CPU, which is
how their accuracy is measured here.
"""

from triton_kit.build_engines.precision.fp16 import FP32_OPS, to_fp16
from triton_kit.build_engines.precision.int8 import (
    KEEP_FLOAT,
    CalibrationSettings,
    Int8Result,
    to_int8,
)

__all__ = ["FP32_OPS", "KEEP_FLOAT", "CalibrationSettings", "Int8Result", "to_fp16", "to_int8"]
