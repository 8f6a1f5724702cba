"""The NMT torch engine: the exported encoder/decoder-step modules as TorchScript or in-process.

``sources`` gives the shared engine hook the PyTorch modules the ONNX export traces
(``EncoderGraph``/``MarianDecoderStep``) with trace feeds and parity feeds of other shapes,
so ``python -m triton_kit.build_engines nmt --engine torch`` writes ``nmt_encoder``/``nmt_decoder``
as TorchScript checked against the verified ONNX. ``step_model`` wraps the same modules in
a :class:`triton_kit.python_models.nmt.torch_steps.TorchStepModel` for in-process benchmarks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from triton_kit.build_engines.families.nmt.export import EncoderGraph, cache_shape, load_model
from triton_kit.build_engines.families.nmt.torchscript.cached_step import MarianCachedStep
from triton_kit.build_engines.families.nmt.torchscript.marian_step import MarianDecoderStep
from triton_kit.build_engines.families.nmt.torchscript.search_encoder import MarianSearchEncoder
from triton_kit.python_models.common.contracts import BEAM_INDEX
from triton_kit.python_models.nmt.torch_steps import TorchStepModel

Feeds = dict[str, np.ndarray]


def step_model(
    model: torch.nn.Module | Path,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> TorchStepModel:
    """A step model over a loaded ``MarianMTModel`` or a checkpoint directory."""
    if not isinstance(model, torch.nn.Module):
        model = load_model(Path(model))
    return TorchStepModel(EncoderGraph(model), MarianDecoderStep(model), device, dtype)


def encoder_feeds(rows: int, length: int, pad: int = 0) -> Feeds:
    """Token ids 5.. with the last rows padded (``pad`` trailing pads on the second row)."""
    ids = np.arange(5, 5 + rows * length, dtype=np.int64).reshape(rows, length) % 50 + 5
    mask = np.ones_like(ids)
    if rows > 1 and pad:
        ids[1, length - pad :] = 0
        mask[1, length - pad :] = 0
    return {"input_ids": ids, "attention_mask": mask}


def decoder_feeds(model: torch.nn.Module, rows: int, src_len: int, past_len: int) -> Feeds:
    """A step whose past has one row more than the step (a finished sentence's row dropped)
    and whose ``beam_index`` repeats and reorders rows, so a trace that baked in either
    shape or the identity fails the parity check."""
    rng = np.random.default_rng(rows * 100 + past_len)
    mask = np.ones((rows, src_len), dtype=np.int64)
    if rows > 1:
        mask[-1, src_len // 2 :] = 0
    past = cache_shape(model, rows + 1, past_len)
    return {
        "input_ids": np.full((rows, 1), 7, dtype=np.int64),
        "encoder_attention_mask": mask,
        "cross_kv": rng.standard_normal(cache_shape(model, rows, src_len)).astype(np.float32),
        "past_kv": rng.standard_normal(past).astype(np.float32),
        BEAM_INDEX: rng.integers(0, rows + 1, rows).astype(np.int64),
    }


def sources(model: torch.nn.Module) -> dict[str, tuple[torch.nn.Module, Feeds, list[Feeds]]]:
    """(module, trace feeds, parity feeds of other shapes) per served model name.

    The parity feeds change every dynamic axis: a trace that baked one in fails the build.
    """
    return {
        "nmt_encoder": (
            EncoderGraph(model),
            encoder_feeds(2, 6, pad=2),
            [encoder_feeds(3, 11, pad=4), encoder_feeds(1, 3)],
        ),
        "nmt_decoder": (
            MarianDecoderStep(model),
            decoder_feeds(model, 3, 5, 4),
            [decoder_feeds(model, 5, 9, 0), decoder_feeds(model, 1, 4, 12)],
        ),
    }


def search_steps(
    model: nn.Module, device: torch.device | str, dtype: torch.dtype, int8_dynamic: bool = False
) -> tuple[MarianSearchEncoder, MarianCachedStep]:
    """The encoder and decoder step the TorchScript search calls, in ``dtype`` on ``device``
    (:mod:`~triton_kit.build_engines.families.nmt.torchscript.search_encoder`,
    :mod:`~triton_kit.build_engines.families.nmt.torchscript.cached_step`; scripted with the
    search), attention fused on CPU. With ``int8_dynamic``, their ``nn.Linear`` layers
    dynamically quantised (CPU only:
    :mod:`~triton_kit.build_engines.families.nmt.torchscript.int8_dynamic`)."""
    device = torch.device(device)
    fused = device.type == "cpu"
    encoder = MarianSearchEncoder(model, dtype, fused).eval().to(device, dtype)
    decoder = MarianCachedStep(model, dtype, fused).eval().to(device, dtype)
    if int8_dynamic:
        from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import quantize

        encoder, decoder = quantize(encoder, [nn.Linear]), quantize(decoder, [nn.Linear])
    return encoder, decoder
