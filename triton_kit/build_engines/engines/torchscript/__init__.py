"""``--engine torch``: TorchScript ``model.pt`` served by Triton's PyTorch backend.

The official container and the embedded server both serve it with Triton's own
pytorch backend (built for the embedded server by ``python -m triton_kit.server.native_backends``).
FP16 is baked into the TorchScript (weights in half, FP32 I/O kept), parity with the
ONNX path is checked at build time, and the instance group is ``KIND_GPU`` when a GPU
is visible while building, ``KIND_CPU`` otherwise.
"""

from triton_kit.build_engines.engines.torchscript.config import (
    TorchConfigOptions,
    torch_model_config,
    torch_model_files,
)
from triton_kit.build_engines.engines.torchscript.script import check_parity, script_module

__all__ = [
    "TorchConfigOptions",
    "check_parity",
    "script_module",
    "torch_model_config",
    "torch_model_files",
]
