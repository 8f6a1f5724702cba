"""The Marian decoder step of the TorchScript search (``nmt_generate``): scripted, with its KV
cache preallocated for the whole call.

:mod:`~triton_kit.build_engines.families.nmt.torchscript.generate` drives it through the
:class:`~triton_kit.build_engines.families.nmt.torchscript.row_step.SearchStep` methods ``begin``,
``step``, ``expand`` and ``keep``. Against the traced
:class:`~triton_kit.build_engines.families.nmt.torchscript.marian_step.MarianDecoderStep` (the
step model's contract, which the search used to call), a step here:

- writes the new position's keys and values into two cache buffers allocated once a call
  (``[layers, 2, max_length, rows, heads, head_dim]``, the call's most rows) instead of
  concatenating a new cache every step and stacking it by layer and in a whole (ten copies a
  step, each a fresh allocation);
- reorders the cache only when rows move (every beam step, and when a finished sentence
  leaves): one ``index_select`` of the filled positions into the other buffer, written in
  place (``out=``), not a copy of the whole cache a step;
- attends over the sentence's encoder keys and values once for all its beams (a query of
  ``num_beams`` rows against the sentence's keys) instead of over a copy per beam;
- computes the encoder-attention bias once a call (:func:`~..export.mask_bias`'s values: 0, or
  the dtype's lowest finite number where the source is padding), not once a step.

The arithmetic is ``MarianDecoderLayer``'s (post-norm), with q, k and v as one GEMM and the
attention through :func:`~triton_kit.build_engines.families.nmt.torchscript.blocks.attend` (one
``scaled_dot_product_attention`` kernel on CPU). The ``nn.Linear`` layers stay modules, so
``--precision int8-dynamic`` quantises them as before.
"""

# No ``from __future__ import annotations``: TorchScript reads the annotations as objects.

import torch
from torch import Tensor, nn

from triton_kit.build_engines.families.nmt.torchscript.blocks import (
    attend,
    fused_linear,
    scripted_activation,
)


class CachedLayer(nn.Module):
    """One ``MarianDecoderLayer`` over a preallocated cache ``[2, length, rows, heads, dim]``."""

    def __init__(
        self, layer: nn.Module, heads: int, activation: nn.Module, fused_attention: bool
    ) -> None:
        super().__init__()
        self.fused_attention = fused_attention
        attention = layer.self_attn
        self.qkv = fused_linear([attention.q_proj, attention.k_proj, attention.v_proj])
        self.out_proj = attention.out_proj
        self.self_norm = layer.self_attn_layer_norm
        cross = layer.encoder_attn
        self.cross_q = cross.q_proj
        self.cross_out = cross.out_proj
        self.cross_norm = layer.encoder_attn_layer_norm
        self.fc1, self.fc2 = layer.fc1, layer.fc2
        self.activation = activation
        self.final_norm = layer.final_layer_norm
        self.scaling = float(attention.scaling)
        self.cross_scaling = float(cross.scaling)
        self.heads = heads
        self.width = int(attention.q_proj.in_features)
        self.head_dim = self.width // heads

    def forward(
        self, hidden: Tensor, cache: Tensor, position: int, cross: Tensor, bias: Tensor, group: int
    ) -> Tensor:
        """``hidden [rows, width]``; ``cache`` this layer's ``[2, > position, >= rows, heads,
        dim]`` (the new keys and values are written at ``position``); ``cross`` this layer's
        ``[2, sentences, heads, src, dim]``, ``bias [sentences, 1, 1, src]``; ``group`` rows
        per sentence."""
        rows = hidden.shape[0]
        heads, dim = self.heads, self.head_dim
        qkv = self.qkv(hidden)
        cache[:, position, :rows] = qkv[:, self.width :].view(rows, 2, heads, dim).transpose(0, 1)
        # [rows, heads, length, dim] views of the filled positions
        keys = cache[0, : position + 1, :rows].permute(1, 2, 0, 3)
        values = cache[1, : position + 1, :rows].permute(1, 2, 0, 3)
        query = qkv[:, : self.width].view(rows, heads, 1, dim)
        out = attend(query, keys, values, self.scaling, None, self.fused_attention)
        out = out.view(rows, self.width)
        hidden = self.self_norm(hidden + self.out_proj(out))
        # one query of ``group`` rows per sentence and head against that sentence's keys
        sentences = rows // group
        query = self.cross_q(hidden).view(sentences, group, heads, dim).transpose(1, 2)
        out = attend(query, cross[0], cross[1], self.cross_scaling, bias, self.fused_attention)
        out = out.transpose(1, 2).reshape(rows, self.width)
        hidden = self.cross_norm(hidden + self.cross_out(out))
        out = self.fc2(self.activation(self.fc1(hidden)))
        return self.final_norm(hidden + out)


class MarianCachedStep(nn.Module):
    """The search's Marian decoder: ``begin`` allocates the call's state, ``step`` decodes one
    position for every live row, ``expand`` and ``keep`` follow the search's rows.

    The state is ``[cache, spare, cross, bias]``: the cache being filled and the buffer the
    next reorder writes into (the two swap at each reorder), the encoder's keys and values per
    live sentence ``[layers, 2, sentences, heads, src, dim]`` and the attention bias per live
    sentence."""

    def __init__(
        self, model: nn.Module, dtype: torch.dtype = torch.float32, fused_attention: bool = True
    ) -> None:
        super().__init__()
        decoder = model.model.decoder
        # mask_bias's floor for the dtype the module will run in (TorchScript has no finfo)
        self.bias_floor = float(torch.finfo(dtype).min)
        config = model.config
        self.heads = int(config.decoder_attention_heads)
        self.width = int(config.d_model)
        self.head_dim = self.width // self.heads
        self.layer_count = len(decoder.layers)
        self.embed = decoder.embed_tokens
        self.embed_scale = float(decoder.embed_scale)
        self.register_buffer("positions", decoder.embed_positions.weight.detach().clone())
        ffn = int(decoder.layers[0].fc1.out_features)
        self.layers = nn.ModuleList(
            CachedLayer(
                layer, self.heads, scripted_activation(layer.activation_fn, ffn), fused_attention
            )
            for layer in decoder.layers
        )
        self.lm_head = model.lm_head
        self.register_buffer("final_logits_bias", model.final_logits_bias.detach().clone()[0])

    @torch.jit.export
    def begin(self, cross: Tensor, mask: Tensor, max_length: int, beam: int) -> list[Tensor]:
        """The state for ``mask.shape[0]`` sentences of up to ``beam`` rows each and
        ``max_length - 1`` positions."""
        rows = mask.shape[0] * beam
        # position-major, so the pages a call touches are the positions it decodes
        shape = [self.layer_count, 2, max_length, rows, self.heads, self.head_dim]
        cache = torch.empty(shape, dtype=cross.dtype, device=cross.device)
        spare = torch.empty(shape, dtype=cross.dtype, device=cross.device)
        bias = ((1.0 - mask.to(cross.dtype)) * self.bias_floor).unsqueeze(1).unsqueeze(1)
        return [cache, spare, cross, bias]

    @torch.jit.export
    def step(
        self,
        tokens: Tensor,
        state: list[Tensor],
        beam_index: Tensor | None,
        position: int,
        group: int,
    ) -> tuple[Tensor, list[Tensor]]:
        """Logits ``[rows, vocab]`` of ``tokens [rows, 1]`` at ``position`` (the cache's
        length), each row continuing the previous step's row ``beam_index`` (None: the same
        rows), ``group`` rows per live sentence."""
        cache, spare, cross, bias = state[0], state[1], state[2], state[3]
        rows = tokens.shape[0]
        if beam_index is not None and position > 0:
            past = cache[:, :, :position]
            torch.index_select(past, 3, beam_index, out=spare[:, :, :position, :rows])
            cache, spare = spare, cache
        hidden = self.embed(tokens[:, 0]) * self.embed_scale + self.positions[position]
        for index, layer in enumerate(self.layers):
            hidden = layer(hidden, cache[index], position, cross[index], bias, group)
        logits = self.lm_head(hidden) + self.final_logits_bias
        return logits, [cache, spare, cross, bias]

    @torch.jit.export
    def expand(self, state: list[Tensor], group: int) -> list[Tensor]:
        """Rows now come ``group`` per sentence: the encoder side stays per sentence."""
        return state

    @torch.jit.export
    def keep(self, state: list[Tensor], sentences: Tensor, group: int) -> list[Tensor]:
        """Only ``sentences`` (indices of the live ones) go on; their rows' cache entries move
        at the next step's reorder."""
        cross = state[2].index_select(2, sentences)
        return [state[0], state[1], cross, state[3].index_select(0, sentences)]
