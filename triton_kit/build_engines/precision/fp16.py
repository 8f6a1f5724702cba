"""FP16 with ONNX Runtime's maintained converter, FP32 at the edges and where it matters.

``onnxruntime.transformers.float16`` is Microsoft's maintained fork of
onnxconverter-common's ``float16``; unlike onnxconverter-common 1.16 it also
retargets ``Cast(to=FLOAT)`` nodes, without which BERT's mask cast produces FP32
where FP16 is expected and the graph does not load.

Inputs and outputs stay FP32 (``keep_io_types``) so configs, clients and the
FP32 model are interchangeable; ops whose FP16 result drifts (normalisations,
softmax, reductions, pow/sqrt of a variance) are kept FP32 through casts.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

import onnx

# Numerically sensitive ops kept in FP32 (on top of the converter's own block list).
FP32_OPS: tuple[str, ...] = (
    "LayerNormalization",
    "SimplifiedLayerNormalization",
    "SkipLayerNormalization",
    "GroupNormalization",
    "InstanceNormalization",
    "Softmax",
    "LogSoftmax",
    "ReduceMean",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceL2",
    "ReduceLogSumExp",
    "Pow",
    "Sqrt",
    "Reciprocal",
)


def to_fp16(src: Path, dst: Path, keep_fp32_ops: Iterable[str] = FP32_OPS) -> Path:
    """Write an FP16 copy of ``src`` to ``dst``; graph I/O and ``keep_fp32_ops`` stay FP32."""
    from onnxruntime.transformers import float16

    model = onnx.load(str(src))
    block = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(keep_fp32_ops))
    with warnings.catch_warnings():
        # The converter warns once per weight clamped to FP16's range; the count is not useful.
        warnings.simplefilter("ignore", UserWarning)
        converted = float16.convert_float_to_float16(model, keep_io_types=True, op_block_list=block)
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(converted, str(dst))
    return dst
