"""Marian text ⇄ ids with sentencepiece alone (no transformers in the server).

Matches ``MarianTokenizer``: the source sentencepiece model segments the text,
``vocab.json`` maps pieces to ids (unknown pieces → ``<unk>``), ``</s>`` is appended,
and sources longer than the model's positional table are truncated to
``max_source_length`` ids, the ``</s>`` included. Decoding drops special tokens and
joins pieces, turning sentencepiece's ``▁`` back into spaces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

_SPACE = "\u2581"
EOS, UNK, PAD = "</s>", "<unk>", "<pad>"


class MarianText:
    def __init__(self, directory: Path, max_source_length: int) -> None:
        directory = Path(directory)
        self.source = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
        self.vocab: dict[str, int] = json.loads((directory / "vocab.json").read_text("utf-8"))
        self.pieces = {index: piece for piece, index in self.vocab.items()}
        self.eos_id, self.unk_id, self.pad_id = (self.vocab[t] for t in (EOS, UNK, PAD))
        self.special = {self.eos_id, self.unk_id, self.pad_id}
        self.max_source_length = max_source_length

    def encode(self, text: str) -> list[int]:
        pieces = self.source.encode(text, out_type=str)
        ids = [self.vocab.get(piece, self.unk_id) for piece in pieces]
        return [*ids[: self.max_source_length - 1], self.eos_id]

    def decode(self, ids: Sequence[int]) -> str:
        pieces = [self.pieces[i] for i in ids if i not in self.special and i in self.pieces]
        return "".join(pieces).replace(_SPACE, " ").strip()
