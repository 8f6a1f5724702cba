"""The aoti engine step: an AOTInductor package of the PyTorch source, served by
``pytorch_aoti``.

Registered as ``Engine.AOTI`` in :mod:`triton_kit.build_engines.engines.registry`. Like the
torch engine it compiles the family's module (``source``), not the ONNX: precision is applied
to the module and the verified FP32 ONNX is the parity reference (``FROM_SOURCE``).
"""

from __future__ import annotations

from pathlib import Path

from triton_kit.build_engines.engines.step import pytorch_source
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import ModelConfig
from triton_kit.build_engines.steps import BuildError

FROM_SOURCE = True
PRECISIONS = ("fp32", "fp16")
SERVE_COMMAND = "python -m triton_kit.server.native_backends build pytorch_aoti"


def validate(options: BuildOptions) -> None:
    if options.precision not in PRECISIONS:
        raise BuildError(
            f"--engine aoti builds {'/'.join(PRECISIONS)} models; INT8 is expressed as Q/DQ "
            "nodes on the ONNX graph: use --engine onnxruntime or tensorrt for it"
        )


def check_available() -> None:
    import torch

    if not hasattr(torch._inductor, "aoti_compile_and_package"):
        raise BuildError(
            f"--engine aoti needs torch._inductor.aoti_compile_and_package (torch 2.6+); "
            f"this torch is {torch.__version__}"
        )


def artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    options: BuildOptions,
    source: tuple | None = None,
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    module, feeds, checks = pytorch_source(name, "--engine aoti", "resnet50 has it", source)
    _check_shapes(name, config)
    from triton_kit.build_engines.engines.aoti.build import aoti_artifacts

    return aoti_artifacts(
        name,
        module,
        feeds,
        onnx_path,
        config,
        precision=options.precision,
        work_dir=options.work_dir,
        check_feeds=checks,
        aoti=options.aoti,
        cuda_graphs=options.tensorrt.cuda_graphs,
    )


def _check_shapes(name: str, config: ModelConfig) -> None:
    """A batch dimension to make dynamic, and fixed inner dimensions (only the batch is
    exported dynamic)."""
    if config.max_batch_size < 2:
        raise BuildError(
            f"{name}: --engine aoti exports a dynamic batch of 1..max_batch_size; "
            f"max_batch_size is {config.max_batch_size} (give --max-batch-size 2 or more)"
        )
    open_dims = [t.name for t in config.input if any(d < 0 for d in t.dims)]
    if open_dims:
        raise BuildError(
            f"{name}: --engine aoti exports only the batch dimension dynamic; "
            f"{', '.join(open_dims)} have other variable dimensions"
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
        f"export the PyTorch source of {name} (dynamic batch 1..{config.max_batch_size}), "
        f"compile it with AOTInductor, check it against {onnx_path}",
        f"write {repo}/config.pbtxt (backend pytorch_aoti, platform torch_aoti) and "
        f"{repo}/1/model.pt2; serving needs `{SERVE_COMMAND}`",
    ]
