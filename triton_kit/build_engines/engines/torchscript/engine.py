"""The torch engine step: TorchScript of the PyTorch source, served by the PyTorch backend.

Registered as ``Engine.TORCH`` in :mod:`triton_kit.build_engines.engines.registry`. Unlike the
ONNX-based engines it scripts the family's PyTorch module (``source``) rather than the ONNX, so
precision is applied to the module (FP16 casts) and the verified FP32 ONNX is the parity
reference; ``FROM_SOURCE`` tells the hook to skip ONNX precision lowering.
"""

from __future__ import annotations

from pathlib import Path

from triton_kit.build_engines.engines.step import pytorch_source
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import ModelConfig
from triton_kit.build_engines.steps import BuildError

FROM_SOURCE = True
PRECISIONS = ("fp32", "fp16")


def validate(options: BuildOptions) -> None:
    if options.precision not in PRECISIONS:
        raise BuildError(
            f"--engine torch builds {'/'.join(PRECISIONS)} models; INT8 is expressed as Q/DQ "
            "nodes on the ONNX graph: use --engine onnxruntime or tensorrt for it (nmt's "
            "TorchScript search alone has int8-dynamic: --search engine)"
        )


def check_available() -> None:
    """torch is a core dependency."""


def artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    options: BuildOptions,
    source: tuple | None = None,
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    families = "resnet50, bert and nmt have it"
    module, feeds, checks = pytorch_source(name, "--engine torch", families, source)
    from triton_kit.build_engines.engines.torchscript.artifacts import torch_artifacts

    return torch_artifacts(
        name,
        module,
        feeds,
        onnx_path,
        config,
        options.precision,
        options.work_dir,
        checks,
        cuda_graphs=options.tensorrt.cuda_graphs,
    )


def describe(
    name: str,
    onnx_path: Path,
    served: Path,
    config: ModelConfig,
    options: BuildOptions,
    dynamic_axes=None,
) -> list[str]:
    repo = options.output_repository / name
    return [
        f"script the PyTorch source of {name} to TorchScript, check it against {onnx_path}",
        f"write {repo}/config.pbtxt (pytorch_libtorch) and {repo}/1/model.pt",
    ]
