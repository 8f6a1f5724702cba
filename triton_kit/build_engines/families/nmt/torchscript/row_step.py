"""A traced step of the step models' contract as the TorchScript search's decoder.

The search (:mod:`~triton_kit.build_engines.families.nmt.torchscript.generate`) drives its
decoder through four methods, the :class:`SearchStep` protocol. :class:`RowStep` gives them to
a traced step of the step models' contract, ``(input_ids [rows, 1], encoder_attention_mask
[rows, src], cross, past, beam_index [rows]) -> (logits [rows, vocab], present)``, with the
encoder's cross state and the mask one row per decoder row and the recurrent or KV state
reordered by the step itself (the RNN's
:class:`~triton_kit.build_engines.families.nmt.rnn.architecture.ReorderingStep`). The
Transformer has its own, :class:`~.cached_step.MarianCachedStep`.
"""

# No ``from __future__ import annotations``: TorchScript reads the annotations as objects.
from typing import Protocol

import torch
from torch import Tensor, nn

from triton_kit.python_models.nmt.decode import STATE_ROWS, DecodeSettings, state_template


class SearchStep(Protocol):
    """What the search calls; ``state`` is the step's own list of tensors."""

    def begin(self, cross: Tensor, mask: Tensor, max_length: int, beam: int) -> list[Tensor]:
        """The state before the first step of ``mask.shape[0]`` sentences (one row each),
        which will grow to ``beam`` rows each and at most ``max_length`` positions."""

    def step(
        self,
        tokens: Tensor,
        state: list[Tensor],
        beam_index: Tensor | None,
        position: int,
        group: int,
    ) -> tuple[Tensor, list[Tensor]]:
        """Logits ``[rows, vocab]`` for ``tokens [rows, 1]`` at ``position`` (tokens decoded
        so far), row ``i`` continuing the previous step's row ``beam_index[i]`` (None: the
        same rows), ``group`` rows per live sentence; and the new state."""

    def expand(self, state: list[Tensor], group: int) -> list[Tensor]:
        """From the next step on, each sentence has ``group`` rows (it had one)."""

    def keep(self, state: list[Tensor], sentences: Tensor, group: int) -> list[Tensor]:
        """Only the live ``sentences`` (indices, ``group`` rows each) go on."""


class RowStep(nn.Module):
    """:class:`SearchStep` over a traced step of the step models' contract; the state is
    ``[past, cross, mask]``, the last two one row per decoder row."""

    state_shape: list[int]  # in the class body: TorchScript types the list from it

    def __init__(self, decoder: nn.Module, settings: DecodeSettings) -> None:
        super().__init__()
        self.decoder = decoder
        # The first decoder state's shape, STATE_ROWS on the row axis: a zero recurrent state
        # or an empty KV cache (python_models.nmt.decode).
        self.state_shape = list(state_template(settings))
        self.state_rows: int = STATE_ROWS

    @torch.jit.export
    def begin(self, cross: Tensor, mask: Tensor, max_length: int, beam: int) -> list[Tensor]:
        rows = mask.shape[0]
        shape = [rows if d == self.state_rows else d for d in self.state_shape]
        past = torch.zeros(shape, dtype=cross.dtype, device=cross.device)
        return [past, cross, mask]

    @torch.jit.export
    def step(
        self,
        tokens: Tensor,
        state: list[Tensor],
        beam_index: Tensor | None,
        position: int,
        group: int,
    ) -> tuple[Tensor, list[Tensor]]:
        past, cross, mask = state[0], state[1], state[2]
        if beam_index is None:
            beam_index = torch.arange(tokens.shape[0], device=tokens.device)
        logits, past = self.decoder(tokens, mask, cross, past, beam_index)
        return logits, [past, cross, mask]

    @torch.jit.export
    def expand(self, state: list[Tensor], group: int) -> list[Tensor]:
        cross = state[1].repeat_interleave(group, dim=2)
        return [state[0], cross, state[2].repeat_interleave(group, dim=0)]

    @torch.jit.export
    def keep(self, state: list[Tensor], sentences: Tensor, group: int) -> list[Tensor]:
        rows = sentences[:, None] * group + torch.arange(group, device=sentences.device)
        rows = rows.reshape(-1)
        return [state[0], state[1].index_select(2, rows), state[2].index_select(0, rows)]
