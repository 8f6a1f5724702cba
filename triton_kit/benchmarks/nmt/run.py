"""NMT: in-process search vs Triton-served vs CTranslate2, one run, either architecture.

``--architecture transformer`` (the default; writes benchmarks/results/nmt.md). Engines, CPU
only, on English number phrases from the held-out split:
- in-process ORT: the served search (python_models.nmt.decode) on ONNX Runtime
  sessions of the same ONNX files Triton loads, timed per phase (encoder, decoder
  steps, search);
- Triton: the ``nmt`` python model through the gRPC SDK, one sentence a request; its
  search runs the same ONNX files in-process; Triton's own statistics per cell;
- CTranslate2 float32 and int8, converted from the same checkpoint;
- other builds of the checkpoint, in process and served: the whole search in ONNX Runtime's
  BeamSearch graph, the int8-dynamic step files, the TorchScript search (fp32, int8-dynamic).

Sizes: ``tiny``, the default number model (3+3 layers, d_model 128), exact match
against num2words; ``large``, a random Marian of opus-mt-en-de's shape
(triton_kit/benchmarks/nmt/large.py: 6+6 layers, d_model 512, 58,101 tokens), speed only,
agreement with the in-process output. Closed loops at each concurrency; the
in-process engines get the batching Triton's dynamic batcher gives the python model
(a worker gathers every queued request into one decode call).

``--architecture rnn`` (writes benchmarks/results/nmt_rnn.md): the recurrent model (``nmt_rnn``)
beside the Transformer (``nmt``), both in process and served, the same search, the same
sentences; its TorchScript search on request (``--torch-generate-sizes tiny``).

What applies to which architecture is triton_kit/benchmarks/nmt/architectures.py's table;
the engines are in_process.py, served.py and ct2.py, the matrix runner matrix.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from triton_kit.benchmarks.harness.measure import machine_description, markdown_table
from triton_kit.benchmarks.nmt.architectures import BENCHMARKED
from triton_kit.benchmarks.nmt.matrix import decoder_profiles, run_suite, suites
from triton_kit.benchmarks.nmt.report import render, render_comparison
from triton_kit.build_engines.families.nmt.options import ARCHITECTURES


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module's description as written, each flag's default (the architecture's)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags; their defaults are the architecture's (:data:`BENCHMARKED`)."""
    front = argparse.ArgumentParser(add_help=False)
    front.add_argument("--architecture", choices=ARCHITECTURES, default="transformer")
    bench = BENCHMARKED[front.parse_known_args(argv)[0].architecture]
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.nmt",
        description=__doc__,
        formatter_class=_Help,
    )
    parser.add_argument(
        "--architecture",
        choices=ARCHITECTURES,
        default="transformer",
        help="transformer: nmt against CTranslate2 and its other builds (results/nmt.md); rnn: "
        "nmt_rnn beside nmt (results/nmt_rnn.md); the other flags' defaults are the "
        "architecture's (--architecture rnn --help shows them)",
    )
    parser.add_argument(
        "--model-repository",
        type=Path,
        default=None,
        help="a repository whose nmt (nmt_rnn) is the Python search over step models, served "
        "as the tiny size's Triton baseline (default: built for the run with --engine "
        "onnxruntime --search python; model_repository/ holds CTranslate2's nmt since it "
        "became the default)",
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="the architecture's checkpoint, for CTranslate2 and the other builds (default: "
        "its committed number model)",
    )
    parser.add_argument("--sizes", help="tiny, large (the Transformer only) or both")
    parser.add_argument("--concurrency", default="1,8,32", help="tiny model")
    parser.add_argument("--large-concurrency", default="8,32")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument(
        "--sentences-per-client",
        type=int,
        help="tiny: sentences per concurrent client (at least --min-sentences per cell)",
    )
    parser.add_argument("--min-sentences", type=int, default=192)
    parser.add_argument("--large-sentences", type=int, default=64, help="per cell")
    parser.add_argument(
        "--repeats",
        type=int,
        help="tiny: measure the matrix this many times (engine order rotated); keep medians",
    )
    parser.add_argument("--large-repeats", type=int, default=1)
    parser.add_argument(
        "--torch-generate-sizes",
        help="sizes also measured with the whole generation in one TorchScript module "
        "(--engine torch --search engine), in process and served by Triton's pytorch backend "
        "('' for none)",
    )
    parser.add_argument(
        "--graph-sizes",
        help="sizes also measured with the whole search in ONNX Runtime's BeamSearch graph "
        "(--search engine), in process and served by Triton's onnxruntime backend ('' for "
        "none; the Transformer only)",
    )
    parser.add_argument(
        "--torch-int8-sizes",
        help="sizes also measured with the TorchScript search at --precision int8-dynamic "
        "(the build refuses the large model's random weights: int8 flips their near-ties) "
        "('' for none)",
    )
    parser.add_argument(
        "--int8-sizes",
        help="sizes also measured on a --precision int8-dynamic build, in process and served "
        "('' for none; the Transformer only)",
    )
    parser.add_argument(
        "--ct2-sizes",
        help="sizes also measured with the --engine ctranslate2 build (int8), served by the "
        "kit's own ctranslate2 backend (`python -m triton_kit.server.native_backends build "
        "ctranslate2` first; '' for none; the Transformer only; its in-process twin is "
        "CTranslate2 int8)",
    )
    parser.add_argument(
        "--ct2-text-sizes",
        help="sizes also measured with the --engine ctranslate2 --ct2-text build (int8): nmt "
        "itself served by the kit's ctranslate2 backend in text mode, tokenising in C++, no "
        "python model (the backend built with libsentencepiece-dev; '' for none; the "
        "Transformer only; its in-process twin is CTranslate2 int8)",
    )
    parser.add_argument(
        "--large-vocab", type=int, default=None, help="default: opus-mt-en-de's 58,101"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads for every engine (written into the served copies' configs too)",
    )
    parser.add_argument("--output", type=Path, help="the report")
    parser.set_defaults(**bench.defaults)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    comparison = bool(BENCHMARKED[args.architecture].beside)
    machine = machine_description()
    load_start = os.getloadavg()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="nmt-bench-"))
    try:
        results, profiles = {}, []
        for suite in suites(args, workdir):
            cells = run_suite(suite, workdir, args.threads)
            if comparison:  # one size, each architecture
                results[BENCHMARKED[suite.architecture].label] = cells
            else:
                results[suite.name] = cells
                profiles += decoder_profiles(suite, args.threads)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    command = "python -m triton_kit.benchmarks.nmt " + shlex.join(argv)
    if comparison:
        text = render_comparison(
            results,
            machine=machine,
            seconds=elapsed,
            args=args,
            table=markdown_table,
            command=command.strip(),
        )
    else:
        text = render(
            results,
            command=command,
            machine=machine,
            load=(load_start, os.getloadavg()),
            seconds=elapsed,
            args=args,
            table=markdown_table,
            profiles=profiles,
            date=f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        )
    args.output.write_text(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
