"""The torch engine's build check (engines/torchscript): TorchScript against the verified
ONNX file, on a scale that holds for FP16 at any output magnitude.

On the H100, `build_engines resnet50 --engine torch --precision fp16` failed its own check:
FP16 logits of magnitude ~30 differed from FP32 ONNX Runtime by 0.6, 2 % of the logits and
the size FP16 rounding gives there, against an absolute 0.05.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from triton_kit.build_engines.engines.torchscript.artifacts import TOLERANCE
from triton_kit.build_engines.engines.torchscript.script import check_parity

SCALE = 1000.0  # outputs far above 1, where FP16's spacing is 0.5


class _Scaled(torch.nn.Module):
    def __init__(self, offset: float = 0.0, half: bool = False) -> None:
        super().__init__()
        self.offset, self.half = offset, half

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * SCALE + self.offset
        return y.half().float() if self.half else y  # FP16 rounding of the output


def _files(tmp_path: Path, module: torch.nn.Module) -> tuple[Path, Path]:
    x = torch.rand(2, 8)
    onnx_path, script_path = tmp_path / "m.onnx", tmp_path / "m.pt"
    torch.onnx.export(_Scaled(), (x,), str(onnx_path), input_names=["x"], output_names=["y"],
                      dynamo=False)  # fmt: skip
    torch.jit.trace(module, x).save(str(script_path))
    return onnx_path, script_path


def _feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).random((2, 8), dtype=np.float32)}


def test_fp16_rounding_of_large_outputs_passes_the_fp16_check(tmp_path: Path) -> None:
    onnx_path, script_path = _files(tmp_path, _Scaled(half=True))
    (diff,) = check_parity(script_path, onnx_path, _feeds()).values()
    assert 0 < diff <= TOLERANCE["fp16"]


def test_a_wrong_model_still_fails_the_fp16_check(tmp_path: Path) -> None:
    onnx_path, script_path = _files(tmp_path, _Scaled(offset=0.1 * SCALE, half=True))
    (diff,) = check_parity(script_path, onnx_path, _feeds()).values()
    assert diff > TOLERANCE["fp16"]


def test_small_outputs_keep_the_absolute_bound(tmp_path: Path) -> None:
    onnx_path, script_path = _files(tmp_path, _Scaled(offset=2e-3))
    (diff,) = check_parity(script_path, onnx_path, {"x": _feeds()["x"] / SCALE}).values()
    assert diff > TOLERANCE["fp32"]  # |y| <= 1: an absolute 2e-3 is still 2e-3
