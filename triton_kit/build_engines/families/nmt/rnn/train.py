"""Train the recurrent NMT model (GRU + attention) on the Transformer's task and vocabulary.

Run: ``python -m triton_kit.build_engines.families.nmt.rnn.train --output DIR`` (or
``python -m triton_kit.build_engines nmt --architecture rnn --train``). Same sentencepiece
vocabularies and held-out split as assets/nmt-en-fr-numbers; seeded corpus, initialisation
and batch order. Sized to train in a few minutes on one CPU thread.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.options import DEFAULT_RNN_CHECKPOINT
from triton_kit.build_engines.families.nmt.rnn import model as rnn_model
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT, encode, pad_batch


@dataclass(frozen=True)
class RnnTrainSettings:
    seed: int = 1234
    examples: int = 100_000
    steps: int = 2500
    batch_size: int = 64
    learning_rate: float = 3e-3
    threads: int = 1
    eval_every: int = 500


def greedy_exact_match(model, tokenizer, numbers: list[int], max_length: int = 64) -> float:
    """Greedy decode in PyTorch (training-time check only; the quality bar is beam 4)."""
    config = model.config
    hits = 0
    with torch.no_grad():
        for start in range(0, len(numbers), 100):
            chunk = numbers[start : start + 100]
            ids = pad_batch(encode(tokenizer, [corpus.english(n) for n in chunk], False), 139)
            mask = (ids != config.pad_token_id).long()
            _, cross = model.encode(ids, mask)
            state = model.initial_state(len(chunk))
            token = torch.full((len(chunk), 1), config.decoder_start_token_id)
            out = []
            for _ in range(max_length):
                logits, state = model.decode(token, mask, cross, state)
                logits[:, -1, config.pad_token_id] = -1e9
                token = logits[:, -1].argmax(-1, keepdim=True)
                out.append(token)
            rows = torch.cat(out, dim=1).tolist()
            for row, number in zip(rows, chunk, strict=True):
                row = row[: row.index(config.eos_token_id)] if config.eos_token_id in row else row
                hits += tokenizer.decode(row, skip_special_tokens=True) == corpus.french(number)
    return hits / len(numbers)


def train(output: Path, settings: RnnTrainSettings) -> Path:
    from transformers import MarianTokenizer

    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    numbers = corpus.training_numbers(split, settings.examples, settings.seed)
    pairs = corpus.pairs(numbers)
    src_ids = encode(tokenizer, [s for s, _ in pairs], False)
    tgt_ids = encode(tokenizer, [t for _, t in pairs], True)
    config = rnn_model.RnnConfig(vocab_size=len(tokenizer.encoder))
    pad = config.pad_token_id
    model = rnn_model.RnnTranslator(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.learning_rate)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, settings.learning_rate, total_steps=settings.steps, pct_start=0.05
    )
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)
    order = np.random.default_rng(settings.seed)
    started = time.perf_counter()
    print(f"{len(pairs)} pairs, {sum(p.numel() for p in model.parameters())} parameters")
    for step in range(settings.steps):
        index = order.integers(0, len(src_ids), settings.batch_size)
        source = pad_batch([src_ids[i] for i in index], pad)
        decoder_in = pad_batch([tgt_ids[i][:-1] for i in index], pad, prefix=pad)
        labels = pad_batch([tgt_ids[i] for i in index], -100)
        logits = model(source, (source != pad).long(), decoder_in)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if (step + 1) % 100 == 0:
            elapsed = time.perf_counter() - started
            print(f"step {step + 1} loss {loss.item():.4f} ({elapsed:.0f} s)", flush=True)
        if (step + 1) % settings.eval_every == 0 or step + 1 == settings.steps:
            model.eval()
            score = greedy_exact_match(model, tokenizer, list(split.valid[:200]))
            model.train()
            print(f"  valid exact match (greedy, 200): {score:.3f}", flush=True)
    model.eval()
    rnn_model.save(model, output)
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=DEFAULT_RNN_CHECKPOINT)
    parser.add_argument("--steps", type=int, default=RnnTrainSettings.steps)
    args = parser.parse_args()
    train(args.output, RnnTrainSettings(steps=args.steps))


if __name__ == "__main__":
    main()
