"""The onnxruntime engine step: serve the (precision-lowered) ONNX as it is.

Registered as ``Engine.ONNXRUNTIME`` in :mod:`triton_kit.build_engines.engines.registry`.
"""

from __future__ import annotations

from pathlib import Path

from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import ModelConfig

FROM_SOURCE = False  # serves the ONNX


def validate(options: BuildOptions) -> None:
    """Every precision runs on ONNX Runtime's CPU provider."""


def check_available() -> None:
    """onnxruntime is a core dependency."""


def artifacts(
    name: str, onnx_path: Path, config: ModelConfig, options: BuildOptions
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    return config, {"model.onnx": onnx_path}


def describe(
    name: str,
    onnx_path: Path,
    served: Path,
    config: ModelConfig,
    options: BuildOptions,
    dynamic_axes=None,
) -> list[str]:
    repo = options.output_repository / name
    return [f"write {repo}/config.pbtxt (onnxruntime_onnx) and {repo}/1/model.onnx"]
