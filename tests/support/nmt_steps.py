"""Decoder-step forms driven side by side over the same steps (the build tests' shared loop)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from triton_kit.build_engines.families.nmt import export

Feed = tuple[torch.Tensor, torch.Tensor]  # (tokens [rows, 1], beam_index [rows])


def agree_over_steps(
    model, forms: Sequence[torch.nn.Module], source: torch.Tensor, mask: torch.Tensor, feeds
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each form from an empty cache over ``feeds``; at every step the forms' logits and
    caches agree with the first form's. Returns the last form's last logits and the source
    row each of its rows came from (for a reference over the same prefixes)."""
    encoder = export.EncoderGraph(model).eval()
    rows = torch.arange(source.shape[0])
    with torch.no_grad():
        cross = encoder(source, mask)[1]
        pasts = [torch.zeros(export.cache_shape(model, len(rows), 0))] * len(forms)
        for tokens, index in feeds:
            rows = rows[index]
            outs = [
                form(tokens, mask[rows], cross.index_select(2, rows), past, index)
                for form, past in zip(forms, pasts, strict=True)
            ]
            for out in outs[1:]:
                torch.testing.assert_close(out[0], outs[0][0], atol=2e-5, rtol=1e-5)
                torch.testing.assert_close(out[1], outs[0][1], atol=2e-5, rtol=1e-5)
            pasts = [out[1] for out in outs]
    return outs[-1][0], rows
