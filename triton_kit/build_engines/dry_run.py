"""``--dry-run``: the plan of work for one model (and for TensorRT its config and trtexec
command), printed instead of built. Nothing here writes a file."""

from __future__ import annotations

from pathlib import Path

from triton_kit.build_engines.engines.step import DynamicAxes, step_of
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.precision.step import (
    CHECK_SAMPLES,
    CalibrationSource,
    calibration_cache,
    keep_float,
    lowered_path,
)
from triton_kit.build_engines.repository import ModelConfig


def describe(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    options: BuildOptions,
    calibration: CalibrationSource | None = None,
    dynamic_axes: DynamicAxes | None = None,
) -> str:
    """The plan of work for one model, from its (possibly not yet exported) ONNX path."""
    served = lowered_path(options, name, onnx_path)
    lines = [
        f"=== plan of work for {name}: --precision {options.precision} "
        f"--engine {options.engine.value} ==="
    ]
    lines += _describe_precision(name, onnx_path, served, options, calibration)
    lines += step_of(options.engine).describe(
        name, onnx_path, served, config, options, dynamic_axes
    )
    return "\n".join(lines)


def _describe_precision(name, onnx_path, served, options, calibration) -> list[str]:
    precision = options.precision
    if precision == "fp32":
        return [f"precision: serve {onnx_path} as exported (FP32)"]
    if precision == "fp16":
        return [
            f"precision: FP16 with onnxruntime.transformers.float16 (FP32 I/O; LayerNorm, Softmax, "
            f"reductions kept FP32): {onnx_path} -> {served}",
            f"check: FP16 vs FP32 on {CHECK_SAMPLES} held-out samples -> "
            f"{served.with_suffix('.accuracy.json')}",
        ]
    if precision == "int8-dynamic":
        return [
            f"precision: INT8 weights (per channel) and run-time activation scales with "
            f"onnxruntime quantize_dynamic on MatMul/Gemm, no calibration: {onnx_path} -> {served}",
            f"check: INT8 vs FP32 on {CHECK_SAMPLES} samples -> "
            f"{served.with_suffix('.accuracy.json')}",
        ]
    settings = options.calibration
    source = "the family's calibration source" if calibration else "NO calibration source"
    cached = Path(onnx_path).exists() and calibration_cache(options, name, onnx_path, calibration)
    cache = "(cache exists: calibration skipped)" if cached and cached.exists() else ""
    return [
        f"precision: INT8 Q/DQ with onnxruntime quantize_static (QDQ, per-channel symmetric "
        f"weights, symmetric activations, zero point 0) on Conv/MatMul/Gemm inputs: "
        f"{onnx_path} -> {served}",
        f"calibration: {settings.method} on {settings.size} samples from {source} {cache}".rstrip(),
        f"kept float (no Q/DQ): nodes matching {list(keep_float(options, name)) or 'none'}",
        f"check: INT8 vs FP32 on {CHECK_SAMPLES} held-out samples -> "
        f"{served.with_suffix('.accuracy.json')}",
    ]
