"""Export a module with a dynamic batch and compile it into an AOTInductor package."""

from __future__ import annotations

from pathlib import Path

import torch

from triton_kit.build_engines.engines.torchscript.script import HalfInside


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
