"""The recurrent model's whole search as one TorchScript module (``nmt_rnn_generate``).

The search is the Transformer's :class:`~build_engines.families.nmt.torchscript.generate.
GenerationModule`; only the model calls differ. The encoder is the traced
:class:`~build_engines.families.nmt.rnn.export.EncoderGraph` (``cross_kv [1, 2, batch, src,
hidden]``, rows on axis 2); the decoder step is the traced :class:`ReorderingStep`, which gathers
the recurrent state ``[layers, 1, rows, hidden]`` by ``beam_index`` before the GRU step, as the
Transformer's step gathers its KV cache. The first state is zeros (the settings'
``recurrent_state`` template).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch import Tensor, nn

from triton_kit.build_engines.families.nmt.rnn.export import DecoderStepGraph, EncoderGraph
from triton_kit.build_engines.families.nmt.rnn.model import RnnTranslator, load
from triton_kit.build_engines.families.nmt.torchscript.generate import GenerationModule
from triton_kit.python_models.nmt.decode import DecodeSettings


class ReorderingStep(nn.Module):
    """``(input_ids, encoder_attention_mask, cross_kv, past_kv, beam_index) -> (logits,
    present_kv)``: the ONNX step graph's computation on the state rows ``beam_index`` picks
    (a beam's parent; a finished sentence's rows are not picked)."""

    def __init__(self, model: RnnTranslator) -> None:
        super().__init__()
        self.step = DecoderStepGraph(model)

    def forward(
        self, input_ids: Tensor, mask: Tensor, cross: Tensor, past: Tensor, beam_index: Tensor
    ) -> tuple[Tensor, Tensor]:
        return self.step(input_ids, mask, cross, past.index_select(2, beam_index))


def traced_steps(
    model: RnnTranslator, device: torch.device | str
) -> tuple[torch.jit.ScriptModule, torch.jit.ScriptModule]:
    """The encoder and the reordering step, traced on ``device`` on feeds whose shapes the
    search never keeps (a padded row; a past with one row more than the step, reordered)."""
    device = torch.device(device)
    config = model.config
    pad = config.pad_token_id
    ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, pad, pad]], device=device)
    rows, src_len = 3, 5
    step_feeds = (
        torch.full((rows, 1), 5, dtype=torch.long, device=device),
        torch.ones(rows, src_len, dtype=torch.long, device=device),
        torch.randn(1, 2, rows, src_len, config.hidden, device=device),
        torch.randn(config.layers, 1, rows + 1, config.hidden, device=device),
        torch.tensor([2, 0, 2], device=device),
    )
    encoder = EncoderGraph(model).eval().to(device)
    decoder = ReorderingStep(model).eval().to(device)
    with torch.no_grad():
        traced_encoder = torch.jit.trace(encoder, (ids, (ids != pad).long()))
        traced_decoder = torch.jit.trace(decoder, step_feeds)
    return traced_encoder, traced_decoder


def generation_module(
    model: RnnTranslator | Path,
    settings: DecodeSettings,
    device: torch.device | str = "cpu",
    int8_dynamic: bool = False,
) -> torch.jit.ScriptModule:
    """The scripted search over an :class:`RnnTranslator` or its checkpoint directory, on a
    copy of its weights: fp32, or with ``int8_dynamic`` its ``nn.Linear`` and ``nn.GRU``
    layers dynamically quantised (CPU only:
    :mod:`triton_kit.build_engines.families.nmt.torchscript.int8_dynamic`)."""
    if not isinstance(model, nn.Module):
        model = load(Path(model))
    model = copy.deepcopy(model).eval()
    if int8_dynamic:
        from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import quantize

        model = quantize(model, [nn.Linear, nn.GRU])
    encoder, decoder = traced_steps(model, device)
    return torch.jit.script(GenerationModule(encoder, decoder, settings))
