"""NMT (Marian): export encoder + KV-cache decoder ONNX, verify them, write nmt models.

Any local Marian checkpoint directory works (``--checkpoint DIR``, with its
``source.spm``, ``target.spm`` and ``vocab.json``); the default is the project's
own English→French number model in assets/nmt-en-fr-numbers, which ``--train``
rebuilds from scratch (seeded).

With --engine and --search left out, each --architecture builds its own default (written once,
with the measurement behind it, in families/nmt/defaults.py; --architecture below prints them):
  transformer: CTranslate2 int8 (--engine ctranslate2) in text mode (--ct2-text): the
    checkpoint converted and written as ``nmt`` itself, served by the kit's own ``ctranslate2``
    backend with sentencepiece inside it (needs libsentencepiece-dev). ``--no-ct2-text`` writes
    it as ``nmt_ct2`` behind ``nmt`` (python) that tokenises and makes one BLS call per batch to
    it. ``--engine onnxruntime --search python`` builds the Python search instead:
    ``nmt_encoder``, ``nmt_decoder`` (ONNX Runtime) and ``nmt`` running the beam search over
    them.
  rnn: the TorchScript search (--engine torch --search engine): ``nmt_rnn_generate``, the
    whole search in one TorchScript module served by Triton's pytorch backend, and ``nmt_rnn``
    (python) that tokenises and calls it by BLS once per beam size of its batch, importing no
    engine. ``--engine onnxruntime --search python`` builds the Python search instead:
    ``nmt_rnn`` over ``nmt_rnn_encoder``/``nmt_rnn_decoder`` (ONNX Runtime in its stub).
One pipeline, training, export and search for both (what differs is the architecture's,
families/nmt/architecture.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.build_engines.families.nmt.corpus import DEFAULT_CHECKPOINT, DEFAULT_RNN_CHECKPOINT
from triton_kit.build_engines.families.nmt.defaults import DEFAULTS, default_of
from triton_kit.build_engines.families.nmt.options import (
    ARCHITECTURES,
    DEFAULT_MAX_BEAM_SIZE,
    SEARCHES,
    NmtOptions,
)

if TYPE_CHECKING:
    from triton_kit.build_engines.options import BuildOptions

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_MAX_BEAM_SIZE",
    "DEFAULT_RNN_CHECKPOINT",
    "NmtOptions",
    "add_arguments",
    "build",
    "default_engine",
    "options_from",
]

_DEFAULTS = NmtOptions()


def options_from(args: argparse.Namespace) -> NmtOptions:
    return NmtOptions(
        architecture=args.architecture,
        checkpoint=args.checkpoint,
        train=args.train,
        train_steps=args.train_steps,
        max_beam_size=args.max_beam_size,
        verify_sentences=args.verify_sentences,
        search=args.search,
        ct2_text=args.ct2_text,
    )


def default_engine(args: argparse.Namespace) -> str:
    """``--engine`` left out: the architecture's (:data:`DEFAULTS`)."""
    return default_of(args.architecture).engine


def _defaults_help() -> str:
    return "; ".join(
        f"{name}: --engine {d.engine} --search {d.search}{' --ct2-text' if d.ct2_text else ''} "
        f"({d.why})"
        for name, d in DEFAULTS.items()
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--architecture",
        choices=ARCHITECTURES,
        default=_DEFAULTS.architecture,
        help="transformer: Marian (writes nmt); rnn: GRU encoder-decoder with attention "
        "(writes nmt_rnn). With --engine and --search left out, each builds its own default: "
        + _defaults_help(),
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=_DEFAULTS.checkpoint,
        help="checkpoint directory (default: the committed number model of --architecture; "
        f"transformer: {DEFAULT_CHECKPOINT.name}, rnn: {DEFAULT_RNN_CHECKPOINT.name})",
    )
    parser.add_argument(
        "--train",
        action="store_true",
        help="retrain the default number model into --checkpoint first (seeded; slow on CPU)",
    )
    parser.add_argument(
        "--train-steps", type=int, default=_DEFAULTS.train_steps, help="override training steps"
    )
    parser.add_argument("--max-beam-size", type=int, default=_DEFAULTS.max_beam_size)
    parser.add_argument(
        "--search",
        choices=SEARCHES,
        default=_DEFAULTS.search,
        help="engine: the whole search inside the engine (--engine ctranslate2: nmt_ct2, its only "
        "search; else writes nmt_generate: ONNX Runtime's BeamSearch with --engine onnxruntime "
        "at fp32 or int8-dynamic, TorchScript with --engine torch at fp32, fp16 or "
        "int8-dynamic (CPU); --architecture rnn: nmt_rnn_generate, TorchScript, --engine torch "
        "at fp32 or int8-dynamic (CPU)); python: the numpy search over the encoder/decoder step "
        "models. Default: the architecture's default search with its default engine (see "
        "--architecture), engine with --engine ctranslate2, python with any other --engine",
    )
    parser.add_argument(
        "--verify-sentences",
        type=int,
        default=_DEFAULTS.verify_sentences,
        help="sentences for the ONNX-vs-PyTorch check",
    )
    parser.add_argument(
        "--ct2-text",
        action=argparse.BooleanOptionalAction,
        default=_DEFAULTS.ct2_text,
        help="with --engine ctranslate2: --ct2-text writes nmt itself as the kit's C++ "
        "ctranslate2 backend in text mode (TEXT in, TRANSLATION out, sentencepiece "
        "tokenisation inside the backend; the converted model and source.spm in its version "
        "folder), with no python model on the path and no nmt_ct2: the same contract as the "
        "python nmt, and it needs the backend built with libsentencepiece-dev (make backends; "
        "scripts/install-system-deps.sh). --no-ct2-text writes the python nmt, tokenising and "
        "calling nmt_ct2 by BLS, as before. Left out: the architecture's default (see "
        "--architecture; transformer: --ct2-text, benchmarks/results/nmt_ct2_text.md)",
    )


def build(options: BuildOptions, model_options: NmtOptions) -> None:
    from triton_kit.build_engines.families.nmt.pipeline import run

    run(options, model_options)
