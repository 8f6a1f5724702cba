"""The torch engine step: TorchScript of the PyTorch source, served by the PyTorch backend.

Registered as ``Engine.TORCH`` in :mod:`build_engines.engines`. Unlike the ONNX-based
engines it scripts the family's PyTorch module (``source``) rather than the ONNX, so
precision is applied to the module (FP16 casts) and the verified FP32 ONNX is the parity
reference; ``FROM_SOURCE`` tells the hook to skip ONNX precision lowering.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from build_engines.repository import ModelConfig
from build_engines.steps import BuildError

FROM_SOURCE = True
PRECISIONS = ("fp32", "fp16")


def validate(precision: str, args: argparse.Namespace) -> None:
    if precision not in PRECISIONS:
        raise BuildError(
            f"--engine torch builds {'/'.join(PRECISIONS)}; INT8 is expressed as Q/DQ nodes "
            "on the ONNX graph: use --engine onnxruntime or tensorrt for it"
        )


def check_available() -> None:
    """torch is a core dependency."""


def artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    args: argparse.Namespace,
    precision: str,
    source: tuple[object, dict] | None = None,
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    if source is None:
        raise BuildError(f"{name}: --engine torch is not wired for this model yet (resnet50 is)")
    from build_engines.torch_engine.artifacts import torch_artifacts

    module, feeds = source
    work = Path(getattr(args, "work_dir", "build"))
    return torch_artifacts(name, module, feeds, onnx_path, config, precision, work)


def describe(name, onnx_path, served, config, args, repo: Path) -> list[str]:
    return [
        f"script the PyTorch source of {name} to TorchScript, check it against {onnx_path}",
        f"write {repo}/config.pbtxt (pytorch_libtorch) and {repo}/1/model.pt",
    ]
