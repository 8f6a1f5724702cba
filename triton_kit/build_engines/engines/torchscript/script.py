"""Trace a PyTorch module to TorchScript (optionally FP16 inside) and check it against ONNX."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from triton_kit.build_engines.steps import info


class HalfInside(torch.nn.Module):
    """FP16 weights and activations, FP32 in and out: the same I/O as the FP32 model."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module.half()

    def forward(self, *inputs: torch.Tensor):
        cast = [t.half() if t.is_floating_point() else t for t in inputs]
        out = self.module(*cast)
        if isinstance(out, tuple):  # NMT's graphs: (hidden, cross_kv), (logits, present_kv)
            return tuple(t.float() for t in out)
        return out.float()


def script_module(
    module: torch.nn.Module,
    example: tuple[torch.Tensor, ...],
    path: Path,
    precision: str = "fp32",
    device: str = "cpu",
) -> Path:
    """Trace ``module`` on ``example`` and save it; fp16 needs a GPU (CPU half is too slow)."""
    if precision not in ("fp32", "fp16"):
        raise ValueError(f"--engine torch supports fp32 and fp16, not {precision}")
    model = module.eval().to(device)
    if precision == "fp16":
        model = HalfInside(model)
    with torch.inference_mode(False), torch.no_grad():
        traced = torch.jit.trace(model, tuple(t.to(device) for t in example), check_trace=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    traced.save(str(path))
    return path


def check_parity(
    script_path: Path, onnx_path: Path, feeds: Mapping[str, np.ndarray], device: str = "cpu"
) -> dict[str, float]:
    """Per output, the max abs difference between the TorchScript model and ONNX Runtime,
    over the ONNX output's largest magnitude where that exceeds 1: absolute for outputs
    within [-1, 1] (embeddings), relative to the scale for larger ones (logits), where FP16's
    rounding grows with the values (0.6 on ResNet-50 logits of ~30 on the H100)."""
    module = torch.jit.load(str(script_path), map_location=device).eval()
    return parity_with_onnx(module, onnx_path, feeds, device)


def parity_with_onnx(
    module, onnx_path: Path, feeds: Mapping[str, np.ndarray], device: str = "cpu"
) -> dict[str, float]:
    """:func:`check_parity`'s scaled differences for any callable taking the feeds' tensors in
    order (a TorchScript module, a loaded AOTInductor package)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    expected = session.run(None, dict(feeds))
    with torch.no_grad():
        got = module(*(torch.from_numpy(v).to(device) for v in feeds.values()))
    got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
    names = [o.name for o in session.get_outputs()]
    return {
        name: float(np.abs(g.float().cpu().numpy() - e).max() / max(1.0, float(np.abs(e).max())))
        for name, g, e in zip(names, got, expected, strict=True)
    }


def worst_parity(
    name: str,
    label: str,
    parity: Callable[[Mapping[str, np.ndarray]], dict[str, float]],
    checks: Sequence[Mapping[str, np.ndarray]],
) -> float:
    """The largest ``parity(check)`` difference over ``checks`` (a :func:`parity_with_onnx`
    of the built engine), each logged as ``name: label vs ONNX Runtime on <shapes>``: both
    compiled engines' build check; the caller holds it against its tolerance."""
    worst = 0.0
    for check in checks:
        diffs = parity(check)
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in check.items())
        info(f"{name}: {label} vs ONNX Runtime on {shapes}: {diffs}")
        worst = max(worst, *diffs.values())
    return worst


def gpu_visible() -> bool:
    return torch.cuda.is_available()
