"""Train the default tiny Marian model (English → French number phrases) on CPU.

Run: ``python -m triton_kit.build_engines nmt --train`` (or
``python -m triton_kit.build_engines.families.nmt.train``). Everything is seeded: the split, the
corpus, sentencepiece, initialisation and batch order, so the same command rebuilds the
committed checkpoint.
"""

from __future__ import annotations

import argparse
import math
import random
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.vocab import write_tokenizer

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[4] / "assets" / "nmt-en-fr-numbers"


@dataclass(frozen=True)
class TrainSettings:
    """Sized to finish in minutes on 2 CPU cores and stay far below 20 MB on disk."""

    seed: int = 1234
    examples: int = 200_000
    steps: int = 8000
    batch_size: int = 256
    learning_rate: float = 1.5e-3
    warmup_steps: int = 400
    label_smoothing: float = 0.05
    vocab_size: int = 80
    d_model: int = 128
    layers: int = 3
    heads: int = 4
    ffn_dim: int = 512
    max_positions: int = 128
    threads: int = 2
    eval_every: int = 1000


def marian_config(vocab_size: int, settings: TrainSettings):
    from transformers import MarianConfig

    pad = vocab_size - 1
    return MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=settings.d_model,
        encoder_layers=settings.layers,
        decoder_layers=settings.layers,
        encoder_attention_heads=settings.heads,
        decoder_attention_heads=settings.heads,
        encoder_ffn_dim=settings.ffn_dim,
        decoder_ffn_dim=settings.ffn_dim,
        max_position_embeddings=settings.max_positions,
        scale_embedding=True,
        dropout=0.1,
        attention_dropout=0.0,
        activation_function="swish",
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )


def generation_config(config, max_length: int):
    """What Opus-MT checkpoints ship: never emit <pad>, beam 4, eos forced at the limit."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bad_words_ids=[[config.pad_token_id]],
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=config.eos_token_id,
        forced_eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        max_length=max_length,
        num_beams=4,
    )


def encode(tokenizer, texts: list[str], target: bool) -> list[list[int]]:
    """Same ids as MarianTokenizer, fast: segment with the spm, then look pieces up."""
    processor = tokenizer.spm_target if target else tokenizer.spm_source
    vocab = tokenizer.encoder
    unk, eos = vocab["<unk>"], vocab["</s>"]
    return [[vocab.get(p, unk) for p in processor.encode(t, out_type=str)] + [eos] for t in texts]


def pad_batch(rows: list[list[int]], pad: int, prefix: int | None = None):
    import torch

    rows = [([prefix] if prefix is not None else []) + r for r in rows]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)


def zero_pad_embedding(model, pad: int) -> None:
    """Keep ``<pad>`` (the decoder start) a zero vector, as in Opus-MT checkpoints.

    CTranslate2 and Marian start decoding from a zero embedding rather than the
    ``<pad>`` row, so a checkpoint whose row is not zero runs as a different model there.
    """
    import torch

    with torch.no_grad():
        model.get_input_embeddings().weight[pad].zero_()


def learning_rate(step: int, settings: TrainSettings) -> float:
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.learning_rate * 0.5 * (1 + math.cos(math.pi * progress))


def exact_match(model, tokenizer, numbers: list[int], num_beams: int) -> float:
    import torch

    model.eval()
    hits = 0
    for start in range(0, len(numbers), 100):
        chunk = numbers[start : start + 100]
        batch = tokenizer([corpus.english(n) for n in chunk], return_tensors="pt", padding=True)
        batch = batch.to(model.device)
        with torch.no_grad():
            out = model.generate(**batch, num_beams=num_beams, max_length=64)
        texts = tokenizer.batch_decode(out, skip_special_tokens=True)
        hits += sum(t == corpus.french(n) for t, n in zip(texts, chunk, strict=True))
    model.train()
    return hits / len(numbers)


def train(output: Path = DEFAULT_CHECKPOINT, settings: TrainSettings | None = None) -> Path:
    """Corpus → sentencepiece → Marian training → ``save_pretrained`` into ``output``."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    settings = settings or TrainSettings()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    output.mkdir(parents=True, exist_ok=True)

    split = corpus.make_split()
    split.save(output / "split.json")
    print(
        f"corpus: {settings.examples} training pairs (held out: {len(split.test)} test, "
        f"{len(split.valid)} valid)",
        flush=True,
    )
    numbers = corpus.training_numbers(split, settings.examples, settings.seed)
    pairs = corpus.pairs(numbers)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    write_tokenizer(output, sources, targets, settings.vocab_size, settings.max_positions)
    tokenizer = MarianTokenizer.from_pretrained(str(output))
    src_ids, tgt_ids = encode(tokenizer, sources, False), encode(tokenizer, targets, True)
    print(f"vocabulary: {len(tokenizer.encoder)} pieces", flush=True)

    config = marian_config(len(tokenizer.encoder), settings)
    model = MarianMTModel(config)
    zero_pad_embedding(model, config.pad_token_id)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"training on {device}", flush=True)
    model.to(device)
    model.generation_config = generation_config(config, 64)
    pad = config.pad_token_id
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=settings.learning_rate, betas=(0.9, 0.98), weight_decay=0.01
    )
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=settings.label_smoothing)
    order = np.random.default_rng(settings.seed)
    model.train()
    started = time.perf_counter()
    for step in range(settings.steps):
        index = order.integers(0, len(src_ids), settings.batch_size)
        source = pad_batch([src_ids[i] for i in index], pad).to(device)
        decoder_in = pad_batch([tgt_ids[i][:-1] for i in index], pad, prefix=pad).to(device)
        labels = pad_batch([tgt_ids[i] for i in index], -100).to(device)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        logits = model(
            input_ids=source, attention_mask=(source != pad).long(), decoder_input_ids=decoder_in
        ).logits
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        zero_pad_embedding(model, pad)
        if (step + 1) % 100 == 0:
            print(
                f"step {step + 1}/{settings.steps} loss {loss.item():.4f} "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        if (step + 1) % settings.eval_every == 0 or step + 1 == settings.steps:
            score = exact_match(model, tokenizer, list(split.valid[:200]), num_beams=1)
            print(f"  valid exact match (greedy, 200): {score:.3f}", flush=True)
    model.eval()
    model.to("cpu")
    model.save_pretrained(str(output))
    tokenizer.save_pretrained(str(output))
    test = exact_match(model, tokenizer, list(split.test), num_beams=4)
    print(f"test exact match (beam 4, {len(split.test)} held out): {test:.4f}", flush=True)
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--steps", type=int, default=TrainSettings.steps)
    args = parser.parse_args()
    train(args.output, TrainSettings(steps=args.steps))


if __name__ == "__main__":
    main()
