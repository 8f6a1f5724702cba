"""The decode loop's model calls on torch modules in-process: CUDA when available, else CPU.

The same :mod:`nmt_decode` search drives it. The cross state and the KV cache stay torch
tensors on the device from step to step (the decoder step gathers the cache by
``beam_index`` itself; the search reorders the cross state through :meth:`take`, an
``index_select`` on the device). Only the token ids and mask go in, and only each row's
best few tokens come out (:meth:`TorchStepModel.candidates`, a top-k on the device): on
the H100 the large model's [rows, 58k] logits crossing to the host and the numpy top-k
over them were 63% of a beam-4 search at concurrency 32. Python 3.10 compatible.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from triton_kit.python_models.nmt.decode import best_first


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _placed(module: torch.nn.Module, device: torch.device, dtype: torch.dtype | None):
    moved = module.to(device) if dtype is None else module.to(device, dtype)
    return moved.eval()


class TorchStepModel:
    """``encode``/``step``/``take`` (see :class:`triton_kit.python_models.nmt.decode.StepModel`)
    over an encoder module ``(input_ids, attention_mask) -> (hidden, cross_kv)`` and a
    decoder-step module ``(input_ids, encoder_attention_mask, cross_kv, past_kv, beam_index) ->
    (logits, present_kv)`` (the graphs the ONNX export traces, so both engines compute the same
    thing)."""

    def __init__(
        self,
        encoder: torch.nn.Module,
        decoder: torch.nn.Module,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = torch.float32,
    ) -> None:
        """``dtype`` casts the modules and the states; ``None`` leaves the modules as they
        are (a TorchScript built with FP16 inside takes and gives FP32)."""
        self.device = torch.device(device) if device is not None else default_device()
        self.dtype = dtype or torch.float32
        self.encoder = _placed(encoder, self.device, dtype)
        self.decoder = _placed(decoder, self.device, dtype)

    def _tensor(self, value: Any, floating: bool = False) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value
        tensor = torch.from_numpy(np.ascontiguousarray(value))
        if floating:
            tensor = tensor.to(self.dtype)
        return tensor.to(self.device, non_blocking=True)

    @torch.inference_mode()
    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> torch.Tensor:
        return self.encoder(self._tensor(input_ids), self._tensor(attention_mask))[1]

    reorders = True  # the decoder-step module gathers the cache by ``beam_index`` itself

    @torch.inference_mode()
    def step(
        self, input_ids, attention_mask, cross_kv, past_kv, beam_index
    ) -> tuple[torch.Tensor, Any]:
        """Logits stay on the device, for :meth:`candidates`."""
        return self.decoder(
            self._tensor(input_ids),
            self._tensor(attention_mask),
            self._tensor(cross_kv, floating=True),
            self._tensor(past_kv, floating=True),
            self._tensor(np.asarray(beam_index, dtype=np.int64)),
        )

    @torch.inference_mode()
    def candidates(
        self, logits: torch.Tensor, keep: int, suppressed: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each row's ``keep`` best tokens and log-probs, as
        :func:`triton_kit.python_models.nmt.decode.row_candidates` computes them from numpy logits
        (log_softmax over every token, then the ban), top-k on the device."""
        logits = logits.float()
        peak = logits.amax(dim=1, keepdim=True)
        log_total = (logits - peak).exp_().sum(dim=1, keepdim=True).log_()
        if suppressed:
            banned = torch.tensor(list(suppressed), device=logits.device)
            logits = logits.index_fill(1, banned, float("-inf"))
        values, tokens = logits.topk(keep, dim=1)
        values = (values - peak) - log_total
        return best_first(values.cpu().numpy(), tokens.cpu().numpy(), keep)

    def synchronize(self) -> None:
        """Wait for the device (for timers: kernels run after their call returns)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @torch.inference_mode()
    def take(self, state: Any, index: np.ndarray) -> torch.Tensor:
        """Rows ``index`` of a device state along axis 2 (beam reorder, finished rows out)."""
        rows = torch.from_numpy(np.ascontiguousarray(index, dtype=np.int64)).to(self.device)
        return self._tensor(state, floating=True).index_select(2, rows)


def load_step_model(encoder: Path, decoder: Path, device: str, threads: int) -> TorchStepModel:
    """The served search's step model over the siblings' TorchScript (``--engine torch``).

    The modules stay as built (FP16 inside where the build asked for it)."""
    if device == "cpu" and threads > 0:
        torch.set_num_threads(threads)

    def load(path: Path) -> torch.nn.Module:
        return torch.jit.load(str(path), map_location=device)

    return TorchStepModel(load(encoder), load(decoder), device, dtype=None)
