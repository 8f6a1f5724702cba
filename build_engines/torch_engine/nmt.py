"""The NMT torch engine for the search: the exported encoder/decoder-step modules in-process.

``step_model`` wraps the same ``EncoderGraph``/``DecoderStepGraph`` the ONNX export traces
in a :class:`python_models.nmt_torch.TorchStepModel`, so ``nmt_decode.generate`` runs the
torch engine (CUDA when available) exactly as it runs ONNX Runtime.
"""

from __future__ import annotations

from pathlib import Path

import torch

from build_engines.nmt.export import DecoderStepGraph, EncoderGraph, load_model
from python_models.nmt_torch import TorchStepModel


def step_model(
    model: torch.nn.Module | Path,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> TorchStepModel:
    """A step model over a loaded ``MarianMTModel`` or a checkpoint directory."""
    if not isinstance(model, torch.nn.Module):
        model = load_model(Path(model))
    return TorchStepModel(EncoderGraph(model), DecoderStepGraph(model), device, dtype)
