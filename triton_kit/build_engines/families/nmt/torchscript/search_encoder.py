"""The Marian encoder of the TorchScript search (``nmt_generate``), scripted.

It returns what :class:`~triton_kit.build_engines.families.nmt.export.EncoderGraph` returns
(the encoder's output and every decoder layer's cross-attention keys and values, ``[layers, 2,
batch, heads, src, dim]``) in fewer kernels than the traced Hugging Face encoder:

- q, k and v of each encoder layer as one GEMM, and the keys and values of every decoder
  layer's cross-attention as one GEMM over the encoder's output (``EncoderGraph`` runs two per
  decoder layer, then stacks them);
- the padding bias built once a call, ``[batch, 1, 1, src]`` (Hugging Face expands it to
  ``[batch, 1, src, src]``), with :func:`~triton_kit.build_engines.families.nmt.export.mask_bias`'s
  values;
- attention as one ``scaled_dot_product_attention`` kernel where the build asks for it (CPU:
  :class:`~.cached_step.CachedLayer` says why only there).

The arithmetic is ``MarianEncoderLayer``'s (post-norm, and its clamp of non-finite float16
values); the ``nn.Linear`` layers stay modules, so ``--precision int8-dynamic`` quantises them.
"""

# No ``from __future__ import annotations``: TorchScript reads the annotations as objects.
import torch
from torch import Tensor, nn

from triton_kit.build_engines.families.nmt.torchscript.blocks import (
    attend,
    fused_linear,
    scripted_activation,
)


class EncoderLayer(nn.Module):
    """One ``MarianEncoderLayer`` over ``[batch, src, width]``."""

    def __init__(
        self, layer: nn.Module, heads: int, activation: nn.Module, fused_attention: bool
    ) -> None:
        super().__init__()
        attention = layer.self_attn
        self.qkv = fused_linear([attention.q_proj, attention.k_proj, attention.v_proj])
        self.out_proj = attention.out_proj
        self.self_norm = layer.self_attn_layer_norm
        self.fc1, self.fc2 = layer.fc1, layer.fc2
        self.activation = activation
        self.final_norm = layer.final_layer_norm
        self.scaling = float(attention.scaling)
        self.heads = heads
        self.width = int(attention.q_proj.in_features)
        self.head_dim = self.width // heads
        self.fused_attention = fused_attention

    def forward(self, hidden: Tensor, bias: Tensor) -> Tensor:
        batch, length = hidden.shape[0], hidden.shape[1]
        qkv = self.qkv(hidden).view(batch, length, 3, self.heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # [3, batch, heads, src, dim]
        out = attend(qkv[0], qkv[1], qkv[2], self.scaling, bias, self.fused_attention)
        out = out.transpose(1, 2).reshape(batch, length, self.width)
        hidden = self.self_norm(hidden + self.out_proj(out))
        out = self.fc2(self.activation(self.fc1(hidden)))
        hidden = self.final_norm(hidden + out)
        if hidden.dtype == torch.float16 and not bool(torch.isfinite(hidden).all()):
            clamp = 65504.0 - 1000.0  # Hugging Face's: float16's largest finite value - 1000
            hidden = torch.clamp(hidden, min=-clamp, max=clamp)
        return hidden


class MarianSearchEncoder(nn.Module):
    """``(input_ids [batch, src], attention_mask [batch, src]) -> (hidden [batch, src, width],
    cross [layers, 2, batch, heads, src, dim])``, as ``EncoderGraph``."""

    def __init__(
        self, model: nn.Module, dtype: torch.dtype = torch.float32, fused_attention: bool = True
    ) -> None:
        super().__init__()
        encoder = model.get_encoder()
        config = model.config
        self.embed = encoder.embed_tokens
        self.embed_scale = float(encoder.embed_scale)
        self.register_buffer("positions", encoder.embed_positions.weight.detach().clone())
        heads = int(config.encoder_attention_heads)
        ffn = int(encoder.layers[0].fc1.out_features)
        self.layers = nn.ModuleList(
            EncoderLayer(
                layer, heads, scripted_activation(layer.activation_fn, ffn), fused_attention
            )
            for layer in encoder.layers
        )
        decoder_layers = model.model.decoder.layers
        projections = []
        for layer in decoder_layers:
            projections += [layer.encoder_attn.k_proj, layer.encoder_attn.v_proj]
        self.cross = fused_linear(projections)
        self.cross_layers = len(decoder_layers)
        self.cross_heads = int(config.decoder_attention_heads)
        self.cross_dim = int(config.d_model) // self.cross_heads
        self.bias_floor = float(torch.finfo(dtype).min)  # mask_bias's (TorchScript has no finfo)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        batch, length = input_ids.shape[0], input_ids.shape[1]
        hidden = self.embed(input_ids) * self.embed_scale + self.positions[:length]
        floor = (1.0 - attention_mask.to(hidden.dtype)) * self.bias_floor
        bias = floor.unsqueeze(1).unsqueeze(1)
        for layer in self.layers:
            hidden = layer(hidden, bias)
        shape = [batch, length, self.cross_layers, 2, self.cross_heads, self.cross_dim]
        cross = self.cross(hidden).view(shape).permute(2, 3, 0, 4, 1, 5).contiguous()
        return hidden, cross
