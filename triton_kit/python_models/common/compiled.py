"""An exported program compiled by torch.compile, with CUDA graphs per batch bucket.

Why: on the H100 torch.compile (Inductor, channels_last, FP16) runs ResNet-50 about twice
as fast as the eager TorchScript Triton's pytorch backend runs (DESIGN.md), and Triton
2.51's pytorch backend loads no AOTInductor package. So the python model loads
``model.pt2`` (``torch.export.save`` of the module, dynamic batch), compiles it once per
instance (``parameters { key: "torch_compile_mode" }``, default
``max-autotune-no-cudagraphs``; static shapes, one compile per graph bucket, Inductor's
cache shared by the instances) and captures one CUDA graph per bucket as
:class:`TorchScriptModel` does. Start-up takes minutes, not seconds.
"""

from __future__ import annotations

import torch

from triton_kit.python_models.common.torchscript import TorchScriptModel

DEFAULT_MODE = "max-autotune-no-cudagraphs"


class CompiledModel(TorchScriptModel):
    def module_filename(self) -> str:
        return "model.pt2"

    def load_module(self, path):
        program = torch.export.load(str(path))
        module = program.module().to(self.device)
        mode = self.params.str("torch_compile_mode", DEFAULT_MODE)
        return torch.compile(module, mode=mode, dynamic=False)
