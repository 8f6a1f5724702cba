"""The onnxruntime engine step: serve the (precision-lowered) ONNX as it is.

Registered as ``Engine.ONNXRUNTIME`` in :mod:`build_engines.engines`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from build_engines.repository import ModelConfig


def validate(precision: str, args: argparse.Namespace) -> None:
    """Every precision runs on ONNX Runtime's CPU provider."""


def check_available() -> None:
    """onnxruntime is a core dependency."""


def artifacts(
    name: str, onnx_path: Path, config: ModelConfig, args: argparse.Namespace, precision: str
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    return config, {"model.onnx": onnx_path}


def describe(name, onnx_path, served, config, args, repo: Path) -> list[str]:
    return [f"write {repo}/config.pbtxt (onnxruntime_onnx) and {repo}/1/model.onnx"]
