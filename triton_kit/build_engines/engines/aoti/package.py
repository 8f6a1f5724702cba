"""Export a module with a dynamic batch, compile it into an AOTInductor package, and check
the loaded package against the verified ONNX."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from triton_kit.build_engines.engines.torchscript.script import HalfInside, parity_with_onnx


def compile_package(
    module: torch.nn.Module,
    example: tuple[torch.Tensor, ...],
    path: Path,
    *,
    max_batch_size: int,
    precision: str = "fp32",
    device: str = "cpu",
    cxx: str | None = None,
) -> Path:
    """``torch.export`` ``module`` on ``example`` with dimension 0 of every input dynamic
    (1..``max_batch_size``), then ``aoti_compile_and_package`` into ``path``. FP16 is inside
    (FP32 in and out, as ``--engine torch``); on a GPU the weights are channels_last."""
    model = module.eval().to(device)
    if precision == "fp16":
        model = HalfInside(model)
    if device == "cuda":
        model = model.to(memory_format=torch.channels_last)
    batch = torch.export.Dim("batch", min=1, max=max_batch_size)
    dynamic = tuple({0: batch} for _ in example)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    compiler = {"cpp.cxx": (None, cxx)} if cxx else {}
    with torch.inference_mode(False), torch.no_grad():
        program = torch.export.export(
            model, tuple(t.to(device) for t in example), dynamic_shapes=dynamic
        )
        with torch._inductor.config.patch(compiler):
            torch._inductor.aoti_compile_and_package(program, package_path=str(path))
    return path


def package_parity(
    package: Path, onnx_path: Path, feeds: Mapping[str, np.ndarray], device: str = "cpu"
) -> dict[str, float]:
    """Per output, the loaded package's scaled difference to ONNX Runtime's on ``feeds``
    (the torch engine's measure: absolute within [-1, 1], relative beyond)."""
    runner = torch._inductor.aoti_load_package(str(package))
    return parity_with_onnx(runner, onnx_path, feeds, device)
