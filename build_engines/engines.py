"""The last step of every family's build: turn a verified FP32 ONNX into what Triton serves.

Every family calls :func:`serving_artifacts` once per ONNX model, so precision
(fp16, int8 on the ONNX graph) and engine (onnxruntime, or a TensorRT plan) are
handled in one place for all of them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from build_engines.repository import ModelConfig

# Yields ONNX Runtime feeds ({input name: array}) of representative data, for INT8 calibration.
CalibrationSource = Callable[[], Iterable[Mapping[str, np.ndarray]]]


def serving_artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    args: argparse.Namespace,
    calibration: CalibrationSource | None = None,
) -> tuple[ModelConfig, dict[str, Path]]:
    """Return the model's config and version-folder files for ``args.precision``/``args.engine``.

    fp32 + onnxruntime serves the ONNX as exported.
    """
    if args.precision == "fp32" and args.engine == "onnxruntime":
        return config, {"model.onnx": onnx_path}
    raise NotImplementedError(
        f"--precision {args.precision} --engine {args.engine} is not implemented yet"
    )
