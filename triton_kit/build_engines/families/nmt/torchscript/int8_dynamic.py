"""``--precision int8-dynamic`` for the TorchScript searches: PyTorch's dynamic quantisation.

``torch.ao.quantization.quantize_dynamic`` replaces each ``nn.Linear`` (and ``nn.GRU``) of a
module with one holding qint8 weights that quantises its activations at run time
(``quantized::linear_dynamic``, ``quantized::quantized_gru_cell`` style ops): no calibration,
as ONNX Runtime's ``quantize_dynamic`` does for the step models. It is applied to a copy of
the model calls before they are traced; the search module around them is unchanged.

``torch.ao.quantization`` is deprecated in favour of torchao, but torchao's int8 weights are
tensor subclasses that TorchScript cannot script or save: these modules' quantized ops are the
only int8 path TorchScript, and so Triton's pytorch backend (libtorch), runs. Their
deprecation warnings are silenced here, around the call, not globally.

The kernels are CPU only (fbgemm/x86/oneDNN): a build that would place the module on a GPU is
refused (:func:`refuse_gpu`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import torch
from torch import nn

from triton_kit.build_engines.steps import BuildError

PRECISION = "int8-dynamic"


def quantize(module: nn.Module, types: Iterable[type[nn.Module]]) -> nn.Module:
    """``module`` with every submodule of ``types`` dynamically quantised to qint8 (in
    place where torch can: pass a copy to keep the float module)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.ao.quantization is deprecated", Warning)
        warnings.filterwarnings("ignore", "torch.quantize_per_tensor", Warning)
        return torch.ao.quantization.quantize_dynamic(
            module.eval(), set(types), dtype=torch.qint8, inplace=True
        )


def refuse_gpu(gpu: bool, what: str) -> None:
    """The build puts the module on the GPU where one is visible; dynamic quantised ops have
    no CUDA kernels."""
    if gpu:
        raise BuildError(
            f"{what} --precision int8-dynamic: PyTorch's dynamic quantised ops run on CPU only, "
            "and with a GPU visible the build places the search on it; build it on a machine "
            "(or with CUDA_VISIBLE_DEVICES=) where no GPU is visible, or use --precision fp16"
        )
