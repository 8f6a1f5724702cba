"""Train an architecture's number model (English → French number phrases) on CPU.

Run: ``python -m triton_kit.build_engines nmt [--architecture rnn] --train`` (or
``python -m triton_kit.build_engines.families.nmt.train [--architecture rnn] --output DIR``).
Everything is seeded: the split, the corpus, sentencepiece, initialisation and batch order, so
the same command rebuilds the committed checkpoint. The loop is this module's; the
architecture's :class:`~triton_kit.build_engines.families.nmt.architecture.TrainingRun` holds its
corpus and vocabularies, model, optimiser and schedule, forward pass, check and save
(the Transformer writes a fresh split and sentencepiece vocabularies; the RNN reuses them).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from triton_kit.build_engines.families.nmt.corpus import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.options import ARCHITECTURES, architecture
from triton_kit.build_engines.families.nmt.vocab import encode, pad_batch

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Architecture

__all__ = ["DEFAULT_CHECKPOINT", "encode", "main", "pad_batch", "train"]


def train(arch: Architecture, output: Path | None = None, steps: int | None = None) -> Path:
    """Corpus → vocabularies → training → the checkpoint in ``output`` (default: the
    architecture's committed one); ``steps`` overrides the architecture's own."""
    import torch

    output = Path(output or arch.default_checkpoint)
    run = arch.training(steps)
    random.seed(run.seed)
    np.random.seed(run.seed)
    torch.manual_seed(run.seed)
    torch.set_num_threads(run.threads)
    tokenizer, split, pairs = run.corpus(output)
    src_ids = encode(tokenizer, [s for s, _ in pairs], False)
    tgt_ids = encode(tokenizer, [t for _, t in pairs], True)
    print(f"{len(pairs)} pairs, vocabulary: {len(tokenizer.encoder)} pieces", flush=True)
    model, optimizer, schedule, device = run.model(tokenizer)
    pad = model.config.pad_token_id
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=run.label_smoothing)
    order = np.random.default_rng(run.seed)
    model.train()
    started = time.perf_counter()
    for step in range(run.steps):
        index = order.integers(0, len(src_ids), run.batch_size)
        source = pad_batch([src_ids[i] for i in index], pad).to(device)
        decoder_in = pad_batch([tgt_ids[i][:-1] for i in index], pad, prefix=pad).to(device)
        labels = pad_batch([tgt_ids[i] for i in index], -100).to(device)
        run.before_step(optimizer, step)
        logits = run.logits(model, source, (source != pad).long(), decoder_in)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if schedule is not None:
            schedule.step()
        run.after_step(model)
        if (step + 1) % 100 == 0:
            print(
                f"step {step + 1}/{run.steps} loss {loss.item():.4f} "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        if (step + 1) % run.eval_every == 0 or step + 1 == run.steps:
            model.eval()
            score = run.valid_score(model, tokenizer, list(split.valid[:200]))
            model.train()
            print(f"  valid exact match (greedy, 200): {score:.3f}", flush=True)
    model.eval()
    run.save(model, tokenizer, output, split)
    return output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--architecture", choices=ARCHITECTURES, default="transformer")
    parser.add_argument(
        "--output", type=Path, default=None, help="default: the architecture's committed model"
    )
    parser.add_argument("--steps", type=int, default=None, help="default: the architecture's")
    args = parser.parse_args()
    train(architecture(args.architecture), args.output, args.steps)


if __name__ == "__main__":
    main()
