"""The Marian decoder step the torch engine traces: the arithmetic of
:class:`triton_kit.build_engines.families.nmt.export.DecoderStepGraph` (``concat_cache`` form) in
fewer kernels. It is the ``nmt_decoder`` step model of ``--engine torch``; the whole TorchScript
search (``--search engine``, ``nmt_generate``) used to call it and now runs its own step with a
preallocated cache (:mod:`~triton_kit.build_engines.families.nmt.torchscript.cached_step`). The
figures below are from when the search called this step.

Under the simple JIT executor Triton's pytorch backend runs, every aten op is one kernel
launch from the interpreter, and on the H100 the step was bound by those launches, not by
the GPU: large Marian, 128 rows, fp16, 2.7 ms a step alone against 3.2 ms at fp32, with
~1,700 aten ops a step of the TorchScript search (``scripts/gpu/diagnostics/
nmt_generate_profile.py``). This form launches fewer:

- one GEMM for the self-attention's query, key and value (their weights concatenated at
  build time) instead of three;
- views, not copies, for every head split and merge (one query position);
- the encoder-attention bias computed once a step, finite in half precision
  (:func:`~build_engines.families.nmt.export.mask_bias`).

Attention stays matmul, softmax, matmul: ``scaled_dot_product_attention`` picked cuDNN's
kernel for fp16 on the H100, which builds a plan for every new shape, and a search makes a
new shape every step (rows, cache length): in one H100 benchmark the TorchScript search ran
51 sentences/s at concurrency 32 with it, 176 with matmuls.

The ONNX export keeps :class:`~build_engines.families.nmt.export.DecoderStepGraph`, whose gathering
form suits ONNX Runtime's CPU provider (no concatenated cache copies).
"""

# No ``from __future__ import annotations``: the module is traced, and keeping it plain
# keeps its annotations ordinary objects.
import torch
from torch import Tensor, nn

from triton_kit.build_engines.families.nmt.export import mask_bias


class FusedSelfAttention(nn.Module):
    """A ``MarianAttention``'s projections with q, k and v as one ``nn.Linear``."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
        self.qkv = nn.Linear(q.in_features, 3 * q.out_features)
        with torch.no_grad():
            self.qkv.weight.copy_(torch.cat([q.weight, k.weight, v.weight]))
            self.qkv.bias.copy_(torch.cat([q.bias, k.bias, v.bias]))
        self.out_proj = attention.out_proj
        self.scaling = float(attention.scaling)


class MarianDecoderStep(nn.Module):
    """``(input_ids [rows, 1], encoder_attention_mask [rows, src], cross_kv, past_kv,
    beam_index [rows]) -> (logits [rows, vocab], present_kv)``: the step model's contract
    (:data:`triton_kit.python_models.common.contracts.NMT_DECODER_INPUTS`), ``present_kv`` being the
    whole reordered cache one position longer."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        decoder = model.model.decoder
        self.embed = decoder.embed_tokens
        self.embed_scale = float(decoder.embed_scale)
        self.positions = decoder.embed_positions.weight
        self.self_attention = nn.ModuleList(FusedSelfAttention(x.self_attn) for x in decoder.layers)
        self.layers = decoder.layers
        self.lm_head = model.lm_head
        self.register_buffer("final_logits_bias", model.final_logits_bias.detach().clone())
        self.heads = int(model.config.decoder_attention_heads)
        self.width = int(model.config.d_model)
        self.head_dim = self.width // self.heads

    def forward(self, input_ids, encoder_attention_mask, cross_kv, past_kv, beam_index):
        past_len = past_kv.shape[4]
        position = self.positions[past_len : past_len + 1]
        hidden = self.embed(input_ids) * self.embed_scale + position.unsqueeze(0)
        bias = mask_bias(encoder_attention_mask, hidden.dtype)
        past_kv = past_kv.index_select(2, beam_index)
        present = []
        for index, layer in enumerate(self.layers):
            hidden, kv = self._layer(index, layer, hidden, past_kv[index], cross_kv[index], bias)
            present.append(kv)
        logits = self.lm_head(hidden[:, 0]) + self.final_logits_bias
        return logits, torch.stack(present)

    def _split(self, x: Tensor) -> Tensor:
        """[rows, 1, width] -> [rows, heads, 1, head_dim] (a view: one position)."""
        return x.view(-1, 1, self.heads, self.head_dim).transpose(1, 2)

    def _merge(self, x: Tensor) -> Tensor:
        """[rows, heads, 1, head_dim] -> [rows, 1, width] (a view: one position)."""
        return x.transpose(1, 2).reshape(-1, 1, self.width)

    @staticmethod
    def _attend(q: Tensor, k: Tensor, v: Tensor, scale: float, bias: Tensor | None) -> Tensor:
        scores = torch.matmul(q, k.transpose(2, 3)) * scale
        if bias is not None:
            scores = scores + bias
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    def _layer(self, index: int, layer, hidden, past: Tensor, cross: Tensor, bias: Tensor):
        attention = self.self_attention[index]
        q, k, v = attention.qkv(hidden).split(self.width, dim=-1)
        k = torch.cat([past[0], self._split(k)], dim=2)
        v = torch.cat([past[1], self._split(v)], dim=2)
        out = self._attend(self._split(q), k, v, attention.scaling, None)
        hidden = layer.self_attn_layer_norm(hidden + attention.out_proj(self._merge(out)))
        cross_attention = layer.encoder_attn
        q = self._split(cross_attention.q_proj(hidden))
        out = self._attend(q, cross[0], cross[1], cross_attention.scaling, bias)
        hidden = layer.encoder_attn_layer_norm(hidden + cross_attention.out_proj(self._merge(out)))
        out = layer.fc2(layer.activation_fn(layer.fc1(hidden)))
        hidden = layer.final_layer_norm(hidden + out)
        return hidden, torch.stack([k, v])
