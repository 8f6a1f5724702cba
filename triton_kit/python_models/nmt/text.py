"""Marian text ⇄ ids with sentencepiece alone (no transformers in the server).

Matches ``MarianTokenizer``: the source sentencepiece model segments the text,
``vocab.json`` maps pieces to ids (unknown pieces → ``<unk>``), ``</s>`` is appended,
and sources longer than the model's positional table are truncated to
``max_source_length`` ids, the ``</s>`` included. Decoding drops special tokens and
joins pieces, turning sentencepiece's ``▁`` back into spaces; checkpoints with
separate vocabularies decode through their ``target_vocab.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

_SPACE = "\u2581"
EOS, UNK, PAD = "</s>", "<unk>", "<pad>"
TARGET_VOCAB = "target_vocab.json"


class MarianText:
    def __init__(self, directory: Path, max_source_length: int) -> None:
        directory = Path(directory)
        self.source = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
        self.vocab: dict[str, int] = json.loads((directory / "vocab.json").read_text("utf-8"))
        target = directory / TARGET_VOCAB  # only where the checkpoint has separate vocabularies
        target_vocab = json.loads(target.read_text("utf-8")) if target.exists() else self.vocab
        self.pieces = {index: piece for piece, index in target_vocab.items()}
        self.eos_id, self.unk_id, self.pad_id = (self.vocab[t] for t in (EOS, UNK, PAD))
        self.special = {target_vocab[t] for t in (EOS, UNK, PAD) if t in target_vocab}
        self.max_source_length = max_source_length
        # id -> its piece, "" for the special tokens and for ids the vocabulary lacks: one
        # list index a token where ``decode`` looked in a set and a dict
        self._piece_of = [
            "" if i in self.special else self.pieces.get(i, "")
            for i in range(max(self.pieces, default=-1) + 1)
        ]

    def encode(self, text: str) -> list[int]:
        pieces = self.source.encode(text, out_type=str)
        ids = [self.vocab.get(piece, self.unk_id) for piece in pieces]
        return [*ids[: self.max_source_length - 1], self.eos_id]

    def decode(self, ids: Sequence[int]) -> str:
        table, size = self._piece_of, len(self._piece_of)
        pieces = [table[i] for i in ids if 0 <= i < size]
        return "".join(pieces).replace(_SPACE, " ").strip()
