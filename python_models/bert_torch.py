"""The ``bert`` model's encoder as a sibling's TorchScript, run in-process.

Why: when ``bert_model`` is built with ``--engine torch`` its version folder holds
``model.pt`` instead of ``model.onnx``; running that file in the ``bert`` stub keeps the
one-model design (no Triton hop per call) on CPU and GPU alike. The device follows the
sibling's instance group (``KIND_GPU``: the GPU the build traced on), so a module traced
on the GPU is not moved to the CPU or the other way round. Python 3.10.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from python_models.base import Arrays
from python_models.sibling import sibling_device

__all__ = ["Encoder", "sibling_device", "torch_encoder"]

Encoder = Callable[[Arrays], np.ndarray]


def torch_encoder(path: Path, device: str, input_names: Sequence[str], threads: int) -> Encoder:
    """feeds -> FP32 embeddings, through the TorchScript module at ``path`` on ``device``."""
    import torch

    if device == "cpu" and threads > 0:
        torch.set_num_threads(threads)
    torch.backends.cudnn.benchmark = False  # re-tunes per shape: ~1 s an execute on the H100
    module = torch.jit.load(str(path), map_location=device).eval()
    names = tuple(input_names)

    def run(feeds: Arrays) -> np.ndarray:
        with torch.inference_mode():
            inputs = [torch.from_numpy(np.ascontiguousarray(feeds[n])).to(device) for n in names]
            out = module(*inputs)
        return out.float().cpu().numpy()

    return run
