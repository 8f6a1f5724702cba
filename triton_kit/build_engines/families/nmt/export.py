"""Export an architecture's two ONNX step graphs (:func:`export_steps`), and the Transformer's.

Every architecture exports the same way: its
:class:`~triton_kit.build_engines.families.nmt.architecture.StepGraph` for the encoder and the
decoder step (module, trace feed, tensor names, dynamic axes), traced to ONNX. The recurrent
model's graphs are thin wrappers of its own ``encode``/``decode``
(:mod:`~triton_kit.build_engines.families.nmt.rnn.architecture`); the Transformer's, written
against the Hugging Face Marian modules, are this module's :class:`EncoderGraph` and
:class:`DecoderStepGraph`:

- encoder: ``input_ids, attention_mask`` → ``last_hidden_state`` and ``cross_kv``,
  the cross-attention keys/values of every decoder layer, computed once per source
  (stacked ``[layers, 2, batch, heads, src_len, head_dim]``).
- decoder: one step with a self-attention cache. ``input_ids [rows, 1]``,
  ``encoder_attention_mask``, ``cross_kv``, ``past_kv [layers, 2, past_rows, heads,
  past_len, head_dim]`` (the previous step's ``present_kv``) and ``beam_index [rows]``
  (the past row each row continues) in; ``logits [rows, vocab]`` and ``present_kv``
  (rows, past_len + 1) out. A step attends over the cache instead of re-running the
  prefix, so its cost does not grow with the output length (beyond the attention read).

The beam reorder is the step's own gather: each layer's keys and values are gathered
by ``beam_index`` straight out of the stacked cache (one copy, which the per-layer slice
needed anyway), attention runs over them and the new position without concatenating
them, and one Concat writes ``present_kv``; the cross keys/values come out of
``cross_kv`` in one Split. Before, each step sliced both caches per layer twice,
concatenated and stacked the self-attention cache twice, and the search then gathered it
by beam in numpy: Split and Concat were 21 of 38 ms of ONNX Runtime's profile of an INT8
step (large model, 44 rows, past 22, 1 thread); step + gather went from 30.6 to 24.2 ms
(44 rows, past 15, interleaved A/B), greedy's step from 29.1 to 23.4 ms (32 rows). Greedy
still pays one gather it does not need (the identity; 1.9 of 22 ms in the profile at 32
rows): skipping it takes an ONNX ``If``, which TensorRT plans handle less well.

The decoder step is written against the Hugging Face modules' own weights (same
order of operations as ``MarianDecoderLayer``), so the graph has plain tensors in
and out, and is checked against the Hugging Face model itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from triton_kit.build_engines.engines import onnx_export
from triton_kit.build_engines.steps import info
from triton_kit.python_models.common.contracts import BEAM_INDEX

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Architecture, StepGraph


def mask_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[rows, 1, 1, src_len]``: 0 where ``mask`` is 1, the lowest finite ``dtype`` where it
    is 0 (Hugging Face's value). Added to the scores, it drops padded positions from the
    softmax as -1e9 did in float32, bit for bit (both underflow ``exp`` to 0), but stays
    finite in float16, where -1e9 is -inf (and ``0 * -inf``, in a kernel that multiplies in
    float16, is NaN)."""
    return ((1.0 - mask.to(dtype)) * torch.finfo(dtype).min).unsqueeze(1).unsqueeze(1)


def _heads(x: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """[rows, len, d_model] → [rows, heads, len, head_dim] (the encoder's cross keys/values:
    rows and len both vary, so the rows are read from the shape)."""
    return x.view(x.shape[0], -1, heads, head_dim).transpose(1, 2)


def _attend(q, k, v, bias, scale, merge) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    if bias is not None:
        scores = scores + bias
    return merge(torch.matmul(torch.softmax(scores, dim=-1), v))


def _attend_cached(q, past: tuple[torch.Tensor, torch.Tensor], k, v, scale, merge):
    """Self-attention of one new position over ``past`` keys/values and its own ``k``, ``v``,
    without concatenating them (a copy of the layer's cache): the softmax spans both, and the
    new position is its last column (counted from the end: no read of the past's length)."""
    past_k, past_v = past
    scores = torch.cat(
        [torch.matmul(q, past_k.transpose(2, 3)), (q * k).sum(-1, keepdim=True)], dim=-1
    )
    probs = torch.softmax(scores * scale, dim=-1)
    return merge(torch.matmul(probs[..., :-1], past_v) + probs[..., -1:] * v)


class EncoderGraph(nn.Module):
    """The HF encoder, plus each decoder layer's cross-attention K/V of its output."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.encoder = model.get_encoder()
        self.cross = nn.ModuleList(layer.encoder_attn for layer in model.model.decoder.layers)
        self.heads = model.config.decoder_attention_heads
        self.head_dim = model.config.d_model // self.heads

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return _heads(x, self.heads, self.head_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        kv = [
            torch.stack([self.split(a.k_proj(hidden)), self.split(a.v_proj(hidden))])
            for a in self.cross
        ]
        return hidden, torch.stack(kv)


class DecoderStepGraph(nn.Module):
    """One decoder step over a K/V cache, mirroring ``MarianDecoderLayer`` (post-norm).

    Two forms of the same arithmetic. The ONNX export's (default) gathers each layer's
    cache rows by ``beam_index`` and attends over past and new position without
    concatenating them, which saves ONNX Runtime's CPU provider copies of the cache.
    ``concat_cache`` makes one gather of the whole cache, then the usual per-layer
    concatenation: the layout ONNX Runtime's BeamSearch subgraph takes
    (:mod:`triton_kit.build_engines.families.nmt.generation_graph`). The torch engine traces its own
    form of the concatenating step
    (:mod:`triton_kit.build_engines.families.nmt.torchscript.marian_step`).

    Shapes come from the config wherever they can: a step's query is one position, so
    ``[rows, 1, d_model]`` and ``[rows, heads, 1, head_dim]`` share a memory layout and every
    head split/merge is a reshape to a constant shape with -1 for the rows. Each read of a
    tensor's shape is a chain of Shape/Gather/Unsqueeze/Concat nodes in the ONNX graph (and
    size/NumToTensor/Int ops in a trace), which at a few rows cost as much as the arithmetic.
    What is read: the past's length (the position) and rows (the cache's flat row index), and
    the source length (to split the cross keys/values by layer).
    """

    def __init__(self, model: nn.Module, *, concat_cache: bool = False) -> None:
        super().__init__()
        self.concat_cache = concat_cache
        decoder = model.model.decoder
        self.embed = decoder.embed_tokens
        self.embed_scale = float(decoder.embed_scale)
        self.positions = decoder.embed_positions.weight
        self.layers = decoder.layers
        self.lm_head = model.lm_head
        self.register_buffer("final_logits_bias", model.final_logits_bias.detach().clone())
        self.heads = model.config.decoder_attention_heads
        self.d_model = model.config.d_model
        self.head_dim = self.d_model // self.heads

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """[rows, 1, d_model] → [rows, heads, 1, head_dim]."""
        return x.reshape(-1, self.heads, 1, self.head_dim)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        """[rows, heads, 1, head_dim] → [rows, 1, d_model]."""
        return x.reshape(-1, 1, self.d_model)

    def forward(self, input_ids, encoder_attention_mask, cross_kv, past_kv, beam_index):
        past_len = past_kv.shape[4]
        position = self.positions[past_len : past_len + 1]
        hidden = self.embed(input_ids) * self.embed_scale + position
        bias = mask_bias(encoder_attention_mask, hidden.dtype)
        if self.concat_cache:
            return self._concatenating(hidden, bias, cross_kv, past_kv.index_select(2, beam_index))
        return self._gathering(hidden, bias, cross_kv, past_kv, beam_index)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden.reshape(-1, self.d_model)) + self.final_logits_bias

    def _concatenating(self, hidden, bias, cross_kv, past_kv):
        """The GPU form: ``past_kv`` already reordered; each layer concatenates its cache."""
        present = []
        for layer, past, pair in zip(
            self.layers, past_kv.unbind(0), cross_kv.unbind(0), strict=True
        ):
            hidden, kv = self._layer(layer, hidden, past.unbind(0), pair.unbind(0), bias)
            present.append(kv)
        return self._logits(hidden), torch.stack(present)

    def _gathering(self, hidden, bias, cross_kv, past_kv, beam_index):
        """The ONNX form: per-layer gathers out of the stacked cache, one final Concat."""
        layers, heads, head_dim = len(self.layers), self.heads, self.head_dim
        past_rows = past_kv.shape[2]
        # [layers * 2 * past_rows, heads, past_len, head_dim]; -1 on past_len, which is 0 at
        # the first step (a 0 in an ONNX Reshape's shape would copy the input's dimension).
        cache = past_kv.reshape(layers * 2 * past_rows, heads, -1, head_dim)
        # Every layer's cross keys and values in one Split (cross_kv[index][0] is two).
        cross = cross_kv.reshape(layers * 2, -1, heads, cross_kv.shape[4], head_dim).unbind(0)
        new = []
        for index, layer in enumerate(self.layers):
            keys = beam_index + 2 * index * past_rows
            past = (cache.index_select(0, keys), cache.index_select(0, keys + past_rows))
            pair = (cross[2 * index], cross[2 * index + 1])
            hidden, (k, v) = self._layer(layer, hidden, past, pair, bias)
            new += [k, v]
        # [layers * 2 * rows, heads, 1, head_dim] → [layers, 2, rows, heads, 1, head_dim]
        new = torch.cat(new).reshape(layers, 2, -1, heads, 1, head_dim)
        return self._logits(hidden), torch.cat([past_kv.index_select(2, beam_index), new], dim=4)

    def _layer(self, layer, hidden, past, cross, bias):
        """One post-norm layer; returns the new hidden state and the keys/values to keep:
        this position's ``(k, v)``, each [rows, heads, 1, head_dim], or with ``concat_cache``
        the whole layer cache stacked, [2, rows, heads, past_len + 1, head_dim]."""
        attn = layer.self_attn
        q = self._split(attn.q_proj(hidden))
        k = self._split(attn.k_proj(hidden))
        v = self._split(attn.v_proj(hidden))
        if self.concat_cache:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
            out = attn.out_proj(_attend(q, k, v, None, attn.scaling, self._merge))
        else:
            out = attn.out_proj(_attend_cached(q, past, k, v, attn.scaling, self._merge))
        hidden = layer.self_attn_layer_norm(hidden + out)
        cross_attn = layer.encoder_attn
        q = self._split(cross_attn.q_proj(hidden))
        scale = cross_attn.scaling
        out = cross_attn.out_proj(_attend(q, cross[0], cross[1], bias, scale, self._merge))
        hidden = layer.encoder_attn_layer_norm(hidden + out)
        out = layer.fc2(layer.activation_fn(layer.fc1(hidden)))
        hidden = layer.final_layer_norm(hidden + out)
        return hidden, (torch.stack([k, v]) if self.concat_cache else (k, v))


def load_model(checkpoint: Path) -> nn.Module:
    from transformers import MarianMTModel

    model = MarianMTModel.from_pretrained(str(checkpoint), attn_implementation="eager")
    return model.eval()


def cache_shape(model: nn.Module, rows: int, length: int) -> tuple[int, ...]:
    config = model.config
    heads = config.decoder_attention_heads
    return (config.decoder_layers, 2, rows, heads, length, config.d_model // heads)


# The decoder step's input axis names: the export's, and the dry run's before any export (the
# encoder's are both architectures': architecture.ENCODER_AXES).
DECODER_AXES = {
    "input_ids": {0: "rows"},
    "encoder_attention_mask": {0: "rows", 1: "src_len"},
    "cross_kv": {2: "rows", 4: "src_len"},
    "past_kv": {2: "past_rows", 4: "past_len"},  # the previous step's rows
    BEAM_INDEX: {0: "rows"},
}


def export_steps(
    architecture: Architecture, model: nn.Module, encoder_onnx: Path, decoder_onnx: Path
) -> tuple[Path, Path]:
    """Both step graphs of ``architecture`` (:class:`EncoderGraph` and :class:`DecoderStepGraph`
    for the Transformer), with their sizes logged."""
    paths = (
        export_encoder(architecture, model, encoder_onnx),
        export_decoder(architecture, model, decoder_onnx),
    )
    for path in paths:
        info(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB")
    return paths


def export_encoder(architecture: Architecture, model: nn.Module, path: Path) -> Path:
    return export_graph(architecture.encoder_graph(model), path)


def export_decoder(architecture: Architecture, model: nn.Module, path: Path) -> Path:
    return export_graph(architecture.decoder_graph(model), path)


def export_graph(graph: StepGraph, path: Path) -> Path:
    """Trace ``graph`` to ONNX at ``path``, then pin the output sizes it names."""
    onnx_export.export(
        graph.module,
        graph.feeds,
        path,
        input_names=list(graph.inputs),
        output_names=list(graph.outputs),
        dynamic_axes={**graph.input_axes, **graph.output_axes},
    )
    return onnx_export.pin_output_dims(path, graph.pinned) if graph.pinned else path
