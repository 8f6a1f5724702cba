"""A randomly initialised Marian with the opus-mt-en-de shape, for speed only (nothing downloaded).

6 + 6 layers, d_model 512, 8 heads, FFN 2048, swish, tied embeddings; the vocabulary has
opus-mt-en-de's 58,101 entries by default: the number model's sentencepiece pieces keep
their ids, ``<pad>`` (also the decoder start) moves to the last id as in opus-mt-en-de, and
the ids between are placeholder pieces. Weights are random (seeded), so outputs are
nonsense and run to the length limit: compare speed, and agreement between engines, only.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch

from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT

# The Python search over ONNX Runtime step models, as the benchmark's builds name it: the
# ``Triton`` baseline (the default build until CTranslate2 became nmt's default).
PYTHON_SEARCH_ARGS = ("--engine", "onnxruntime", "--search", "python")

OPUS_MT_EN_DE_VOCAB = 58101
MAX_LENGTH = 32  # HF max_length (start token included): 31 generated tokens per sentence


def write_checkpoint(directory: Path, vocab_size: int = OPUS_MT_EN_DE_VOCAB) -> Path:
    from transformers import MarianConfig, MarianMTModel

    directory.mkdir(parents=True, exist_ok=True)
    for name in ("source.spm", "target.spm"):
        shutil.copy(DEFAULT_CHECKPOINT / name, directory / name)
    pieces = json.loads((DEFAULT_CHECKPOINT / "vocab.json").read_text("utf-8"))
    pad = vocab_size - 1
    vocab = {piece: index for piece, index in pieces.items() if piece != "<pad>"}
    used = set(vocab.values())
    vocab.update({f"<x{i}>": i for i in range(vocab_size - 1) if i not in used})
    vocab["<pad>"] = pad
    (directory / "vocab.json").write_text(json.dumps(vocab), "utf-8")
    tokenizer = json.loads((DEFAULT_CHECKPOINT / "tokenizer_config.json").read_text("utf-8"))
    tokenizer.pop("added_tokens_decoder", None)
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer, indent=1), "utf-8")
    torch.manual_seed(0)
    config = MarianConfig(  # opus-mt-en-de's shape
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        activation_function="swish",
        max_position_embeddings=512,
        scale_embedding=True,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )
    model = MarianMTModel(config).eval()
    model.generation_config.bad_words_ids = [[pad]]
    model.generation_config.max_length = MAX_LENGTH
    model.generation_config.num_beams = 4
    model.save_pretrained(str(directory))
    return directory


def build_repository(
    checkpoint: Path,
    repository: Path,
    work: Path,
    threads: int,
    precision: str = "fp32",
    engine_args: Sequence[str] = (),
) -> Path:
    """``nmt`` and its engine models of the checkpoint, through the real build: the Python
    search over ``nmt_encoder`` and ``nmt_decoder`` (:data:`PYTHON_SEARCH_ARGS`, the benchmark's
    ``Triton`` baseline, no longer the build's default) unless ``engine_args`` names another
    (e.g. ``--engine torch --search engine``; later flags win)."""
    from triton_kit.build_engines.cli import build_from_argv

    build_from_argv(build_argv(checkpoint, repository, work, threads, precision, engine_args))
    return repository


def build_argv(
    checkpoint: Path,
    repository: Path,
    work: Path,
    threads: int,
    precision: str = "fp32",
    engine_args: Sequence[str] = (),
) -> list[str]:
    """The ``python -m triton_kit.build_engines`` arguments :func:`build_repository` runs."""
    argv = ["nmt", "--checkpoint", str(checkpoint), "--max-beam-size", "16"]
    argv += ["--precision", precision, *PYTHON_SEARCH_ARGS, *engine_args]
    argv += ["--verify-sentences", "2", "--output-repository", str(repository)]
    argv += ["--work-dir", str(work), "--instances", "1", "--threads", str(threads)]
    return argv
