"""Sentencepiece vocabularies and a Marian tokenizer directory, trained on a corpus.

Marian keeps two sentencepiece models (``source.spm``, ``target.spm``) that only
segment text, and one shared ``vocab.json`` that maps pieces to model ids. The
layout follows the Opus-MT checkpoints: ``</s>`` is id 0 (eos), ``<unk>`` id 1,
``<pad>`` the last id (also the decoder start token).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

EOS, UNK, PAD = "</s>", "<unk>", "<pad>"


def train_spm(sentences: Iterable[str], vocab_size: int) -> bytes:
    """A unigram model; small vocabularies suit the short, closed-class number phrases."""
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences)),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    return buffer.getvalue()


def pieces(model: bytes) -> list[str]:
    processor = spm.SentencePieceProcessor(model_proto=model)
    return [
        processor.id_to_piece(i)
        for i in range(processor.get_piece_size())
        if not (processor.is_unknown(i) or processor.is_control(i))
    ]


def shared_vocab(source_model: bytes, target_model: bytes) -> dict[str, int]:
    ordered = [EOS, UNK]
    seen = set(ordered)
    for piece in pieces(source_model) + pieces(target_model):
        if piece not in seen:
            seen.add(piece)
            ordered.append(piece)
    ordered.append(PAD)
    return {piece: index for index, piece in enumerate(ordered)}


def write_tokenizer(
    directory: Path,
    sources: list[str],
    targets: list[str],
    vocab_size: int,
    max_length: int,
) -> None:
    """Train both sentencepiece models and save a MarianTokenizer directory."""
    from transformers import MarianTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    source_model = train_spm(sources, vocab_size)
    target_model = train_spm(targets, vocab_size)
    (directory / "source.spm").write_bytes(source_model)
    (directory / "target.spm").write_bytes(target_model)
    vocab = shared_vocab(source_model, target_model)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1) + "\n")
    tokenizer = MarianTokenizer(
        source_spm=str(directory / "source.spm"),
        target_spm=str(directory / "target.spm"),
        vocab=str(directory / "vocab.json"),
        model_max_length=max_length,
    )
    tokenizer.save_pretrained(str(directory))


def encode(tokenizer, texts: list[str], target: bool) -> list[list[int]]:
    """Same ids as MarianTokenizer, fast: segment with the spm, then look pieces up."""
    processor = tokenizer.spm_target if target else tokenizer.spm_source
    vocab = tokenizer.encoder
    unk, eos = vocab[UNK], vocab[EOS]
    return [[vocab.get(p, unk) for p in processor.encode(t, out_type=str)] + [eos] for t in texts]


def pad_batch(rows: list[list[int]], pad: int, prefix: int | None = None):
    """Rows of ids as one ``[rows, longest]`` long tensor, right-padded with ``pad`` (each row
    after ``prefix``, where given)."""
    import torch

    rows = [([prefix] if prefix is not None else []) + r for r in rows]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
