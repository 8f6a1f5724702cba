"""Pieces the scripted search encoder and decoder step share: attention, fused projections,
the activation as TorchScript."""

# No ``from __future__ import annotations``: TorchScript reads the annotations as objects.

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def attend(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    scale: float,
    bias: Tensor | None,
    fused: bool,
) -> Tensor:
    """``softmax(query keys^T * scale + bias) values`` over ``[batch, heads, length, dim]``:
    ``scaled_dot_product_attention`` where ``fused`` (on CPU, one kernel for five), else
    Hugging Face's eager matmul, softmax, matmul (on the GPU, where the fused call picked
    cuDNN's kernel, which plans every new shape, see
    :mod:`~triton_kit.build_engines.families.nmt.torchscript.marian_step`)."""
    if fused:
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=bias, scale=scale)
    scores = torch.matmul(query, keys.transpose(2, 3)) * scale
    if bias is not None:
        scores = scores + bias
    return torch.matmul(torch.softmax(scores, dim=-1), values)


def fused_linear(layers: list[nn.Linear]) -> nn.Linear:
    """One ``nn.Linear`` computing ``layers`` side by side (their outputs concatenated)."""
    first = layers[0]
    fused = nn.Linear(first.in_features, sum(layer.out_features for layer in layers))
    fused.to(first.weight.device, first.weight.dtype)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([layer.weight for layer in layers]))
        fused.bias.copy_(torch.cat([layer.bias for layer in layers]))
    return fused


def scripted_activation(activation: nn.Module, width: int) -> nn.Module:
    """The layer's activation as it is where TorchScript scripts it (``nn.SiLU``, Marian's
    ``swish``), else traced on a ``[2, width]`` input (Hugging Face's activations are
    elementwise)."""
    try:
        torch.jit.script(activation)
    except Exception:
        return torch.jit.trace(activation, torch.randn(2, width))
    return activation
