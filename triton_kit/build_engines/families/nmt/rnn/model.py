"""A GRU encoder-decoder with Luong ("general") attention, shaped for the served search.

The classic NMT architecture (Cho et al.'s GRU encoder-decoder with Luong et al.'s
attention). Its two ONNX graphs keep the Transformer's tensor names and the search's
row axis (axis 2) so that ``triton_kit.python_models.nmt.decode`` drives both unchanged:

- encoder: ``input_ids, attention_mask [batch, src]`` → ``last_hidden_state
  [batch, src, 2*hidden]`` and ``cross_kv [1, 2, batch, src, hidden]`` (attention keys
  ``W_a·m`` and values ``m`` projected to the decoder width, computed once);
- decoder step: ``input_ids [rows, 1], encoder_attention_mask [rows, src], cross_kv,
  past_kv [layers, 1, rows, hidden]`` → ``logits [rows, vocab]`` and the new
  ``present_kv`` (same shape as ``past_kv``: a recurrent state, not a growing cache).

The first decoder state is zeros: attention gives the first step its source context.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

WEIGHTS = "model.pt"
CONFIG = "config.json"


@dataclass(frozen=True)
class RnnConfig:
    """Sizes and special ids; stored as config.json beside the weights."""

    vocab_size: int = 140
    embed_dim: int = 96
    hidden: int = 192
    layers: int = 1
    pad_token_id: int = 139
    eos_token_id: int = 0
    decoder_start_token_id: int = 139

    def save(self, directory: Path) -> None:
        payload = {"architecture": "gru-luong-attention", **asdict(self)}
        (directory / CONFIG).write_text(json.dumps(payload, indent=1) + "\n")

    @classmethod
    def load(cls, directory: Path) -> RnnConfig:
        payload = json.loads((directory / CONFIG).read_text())
        payload.pop("architecture", None)
        return cls(**payload)


class RnnTranslator(nn.Module):
    """Bidirectional GRU encoder, GRU decoder, Luong general attention."""

    def __init__(self, config: RnnConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden
        self.embed = nn.Embedding(config.vocab_size, config.embed_dim)
        self.forward_rnn = nn.GRU(config.embed_dim, h // 2, batch_first=True)
        self.backward_rnn = nn.GRU(config.embed_dim, h // 2, batch_first=True)
        self.values = nn.Linear(h, h, bias=False)
        self.keys = nn.Linear(h, h, bias=False)
        self.decoder = nn.GRU(config.embed_dim, h, num_layers=config.layers, batch_first=True)
        self.combine = nn.Linear(2 * h, h)
        self.output = nn.Linear(h, config.vocab_size)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        """Memory ``[batch, src, hidden]`` and cross state ``[1, 2, batch, src, hidden]``.

        The backward GRU reads each sentence reversed within its own length, so padding
        never precedes real tokens in either direction: a sentence encodes the same
        whatever it is batched with (which Triton's dynamic batching relies on).
        """
        embedded = self.embed(input_ids)
        flip = _reverse_within_length(attention_mask).unsqueeze(-1)
        forward, _ = self.forward_rnn(embedded)
        backward, _ = self.backward_rnn(embedded.gather(1, flip.expand_as(embedded)))
        backward = backward.gather(1, flip.expand_as(backward))
        memory = torch.cat([forward, backward], dim=-1)
        cross = torch.stack([self.keys(memory), self.values(memory)]).unsqueeze(0)
        return memory, cross

    def attend(self, hidden: torch.Tensor, cross: torch.Tensor, mask: torch.Tensor):
        """Luong: score = h·(W_a m), context = Σ a m, out = tanh(W_c [context; h])."""
        keys, values = cross[0, 0], cross[0, 1]
        scores = torch.bmm(hidden, keys.transpose(1, 2))
        scores = scores.masked_fill(mask.unsqueeze(1) == 0, -1.0e9)
        context = torch.bmm(torch.softmax(scores, dim=-1), values)
        return torch.tanh(self.combine(torch.cat([context, hidden], dim=-1)))

    def decode(self, input_ids, attention_mask, cross, state):
        """Teacher-forced (or one-step) decoding: logits ``[batch, tgt, vocab]``, new state."""
        hidden, new_state = self.decoder(self.embed(input_ids), state)
        return self.output(self.attend(hidden, cross, attention_mask)), new_state

    def initial_state(self, rows: int) -> torch.Tensor:
        return torch.zeros(self.config.layers, rows, self.config.hidden)

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        _, cross = self.encode(input_ids, attention_mask)
        state = self.initial_state(input_ids.shape[0]).to(cross.device)
        return self.decode(decoder_input_ids, attention_mask, cross, state)[0]


def _reverse_within_length(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index ``[batch, src]`` reversing each row's first ``length`` positions (an involution)."""
    lengths = attention_mask.sum(dim=1, keepdim=True)
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    positions = positions.unsqueeze(0).expand_as(attention_mask)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)


def load(directory: Path) -> RnnTranslator:
    model = RnnTranslator(RnnConfig.load(directory))
    model.load_state_dict(torch.load(directory / WEIGHTS, map_location="cpu", weights_only=True))
    return model.eval()


def save(model: RnnTranslator, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save(directory)
    torch.save(model.state_dict(), directory / WEIGHTS)
