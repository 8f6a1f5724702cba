"""NMT (Marian): export encoder + KV-cache decoder ONNX, verify them, write nmt models.

Any local Marian checkpoint directory works (``--checkpoint DIR``, with its
``source.spm``, ``target.spm`` and ``vocab.json``); the default is the project's
own English→French number model in assets/nmt-en-fr-numbers, which ``--train``
rebuilds from scratch (seeded). Writes ``nmt_encoder``, ``nmt_decoder`` (ONNX
Runtime) and ``nmt`` (python BLS running the beam search) into the repository.
``--architecture rnn`` builds the recurrent model (assets/nmt-rnn-en-fr-numbers) as
``nmt_rnn`` instead, served by the same search.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from build_engines.nmt.train import DEFAULT_CHECKPOINT

DEFAULT_RNN_CHECKPOINT = DEFAULT_CHECKPOINT.parent / "nmt-rnn-en-fr-numbers"
ARCHITECTURES = ("transformer", "rnn")

DEFAULT_MAX_BEAM_SIZE = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--architecture",
        choices=ARCHITECTURES,
        default="transformer",
        help="transformer: Marian (writes nmt); rnn: GRU encoder-decoder with attention "
        "(writes nmt_rnn, served by the same search)",
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="checkpoint directory (default: the committed number model of --architecture; "
        f"transformer: {DEFAULT_CHECKPOINT.name}, rnn: {DEFAULT_RNN_CHECKPOINT.name})",
    )
    parser.add_argument(
        "--train",
        action="store_true",
        help="retrain the default number model into --checkpoint first (seeded; slow on CPU)",
    )
    parser.add_argument("--train-steps", type=int, default=None, help="override training steps")
    parser.add_argument("--max-beam-size", type=int, default=DEFAULT_MAX_BEAM_SIZE)
    parser.add_argument(
        "--verify-sentences",
        type=int,
        default=16,
        help="sentences for the ONNX-vs-PyTorch check",
    )


def build(args: argparse.Namespace) -> None:
    rnn = getattr(args, "architecture", "transformer") == "rnn"
    if args.checkpoint is None:
        args.checkpoint = DEFAULT_RNN_CHECKPOINT if rnn else DEFAULT_CHECKPOINT
    if rnn:
        from build_engines.nmt.rnn_pipeline import run
    else:
        from build_engines.nmt.pipeline import run
    run(args)
