"""INT8 without calibration: ONNX Runtime's dynamic quantisation, for its CPU provider.

``quantize_dynamic`` stores the MatMul/Gemm weights as INT8 (symmetric, one scale per
output channel) and quantises each activation at run time from its own range
(``DynamicQuantizeLinear`` + ``MatMulInteger``, fused by ONNX Runtime's optimiser). No
calibration data, nothing to drift: the standard CPU recipe for transformers, and the
scheme CTranslate2's ``int8`` uses. The graph is ONNX Runtime's own ops: TensorRT cannot
build it (use ``--precision int8``, Q/DQ, there). An activation's scale is one per
tensor, from the whole batch: a row's output can change slightly with its batch mates.
"""

from __future__ import annotations

import logging
from pathlib import Path

QUANTIZED_OPS: tuple[str, ...] = ("MatMul", "Gemm")


def to_int8_dynamic(source: Path, target: Path) -> Path:
    """Write ``source`` with INT8 per-channel weights and run-time activation ranges."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # "consider pre-processing": a shape pass changes nothing here
    try:
        quantize_dynamic(
            source,
            target,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=list(QUANTIZED_OPS),
        )
    finally:
        logger.setLevel(level)
    return target
