"""Recurrent (nmt_rnn) vs Transformer (nmt) NMT, in-process and served, in one run.

Both models go through the same search (python_models.nmt.decode): in-process on
ONNX Runtime sessions of the served ONNX files, with a micro-batcher gathering
queued sentences into one decode call (what Triton's dynamic batcher gives the BLS
model); served through the gRPC SDK, one sentence a request. Closed loops at
concurrency 1, 8 and 32, beam 1 and 4, on the held-out numbers. Writes
benchmarks/results/nmt_rnn.md (a separate file from benchmarks/results/nmt.md, whose script another
change is rewriting).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece as spm

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import machine_description, markdown_table, report_header
from triton_kit.benchmarks.nmt.run import MAX_BATCH, BatchFn, MicroBatcher
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.repository import parse, render

ROOT = Path(__file__).resolve().parents[3]
FAMILIES = {"transformer (nmt)": "nmt", "GRU + attention (nmt_rnn)": "nmt_rnn"}

Translate = Callable[[str], str]


@dataclass(frozen=True)
class Cell:
    model: str
    engine: str
    beam: int
    concurrency: int
    latencies_s: tuple[float, ...]
    wall_s: float
    tokens: int
    exact: float

    @property
    def sentences_per_s(self) -> float:
        return len(self.latencies_s) / self.wall_s

    def ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000)


def batch_engine(run: Callable[[Sequence[str], int], list[str]]) -> BatchFn:
    """``run(texts, beam) -> translations`` as the shared micro-batcher's engine."""

    def engine(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
        for index, text in enumerate(run(texts, beam)):
            done(index, text)

    return engine


def in_process(repository: Path, bls: str, threads: int):
    """The served search on the served ONNX files, settings read from the served config."""
    from triton_kit.python_models.common.parameters import ModelParameters
    from triton_kit.python_models.nmt.decode import Job, generate
    from triton_kit.python_models.nmt.ort import OrtStepModel
    from triton_kit.python_models.nmt.settings import from_parameters
    from triton_kit.python_models.nmt.text import MarianText

    config = parse((repository / bls / "config.pbtxt").read_text())
    params = ModelParameters({k: v.string_value for k, v in config.parameters.items()})
    settings, limits = from_parameters(params)
    text = MarianText(repository / bls / "1", limits.max_source_length)
    runner = OrtStepModel(
        repository / params.str("encoder_model") / "1" / "model.onnx",
        repository / params.str("decoder_model") / "1" / "model.onnx",
        threads,
    )

    def run(texts: Sequence[str], beam: int) -> list[str]:
        jobs = [Job(text.encode(t), beam, limits.default_max_length) for t in texts]
        return [text.decode(ids) for ids in generate(runner, jobs, settings)]

    return run


def measure(label, engine, calls: list[Translate], beam, pairs, count_tokens) -> Cell:
    """``len(calls)`` closed-loop clients share ``pairs``."""
    for call in calls[:2]:
        call(pairs[0][0])
    counter, lock = itertools.count(), threading.Lock()
    latencies: list[float] = []
    outputs: dict[int, str] = {}

    def client(call: Translate) -> None:
        while (index := next(counter)) < len(pairs):
            start = time.perf_counter()
            out = call(pairs[index][0])
            with lock:
                latencies.append(time.perf_counter() - start)
                outputs[index] = out

    workers = [threading.Thread(target=client, args=(c,)) for c in calls]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    texts = [outputs[i] for i in range(len(pairs))]
    exact = float(np.mean([t == ref for t, (_, ref) in zip(texts, pairs, strict=True)]))
    tokens = sum(count_tokens(t) for t in texts)
    cell = Cell(label, engine, beam, len(calls), tuple(latencies), wall, tokens, exact)
    print(
        f"{label:28s} {engine:10s} beam {beam} c={len(calls):<3d} "
        f"{cell.sentences_per_s:7.1f} sent/s {tokens / wall:7.0f} tok/s "
        f"p50 {cell.ms(50):6.1f} ms p99 {cell.ms(99):6.1f} ms exact {exact:.3f}",
        flush=True,
    )
    return cell


def copy_models(source: Path, target: Path, threads: int) -> None:
    """Served copies with the in-process engines' intra-op thread budget."""
    for bls in FAMILIES.values():
        for name in (bls, f"{bls}_encoder", f"{bls}_decoder"):
            shutil.copytree(source / name, target / name)
            if name == bls:
                continue
            config_file = target / name / "config.pbtxt"
            config = parse(config_file.read_text())
            config.parameters["intra_op_thread_count"].string_value = str(threads)
            config.parameters["inter_op_thread_count"].string_value = "1"
            config_file.write_text(render(config))


def run(args: argparse.Namespace) -> list[Cell]:
    from triton_kit.client import TritonClient
    from triton_kit.server import ServerConfig, TritonServer

    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    pairs_all = [(corpus.english(n), corpus.french(n)) for n in split.test]
    target = spm.SentencePieceProcessor(model_file=str(DEFAULT_CHECKPOINT / "target.spm"))

    def count_tokens(text: str) -> int:
        return len(target.encode(text)) + 1  # + </s>

    workdir = Path(tempfile.mkdtemp(prefix="nmt-rnn-bench-"))
    repository = workdir / "repository"
    copy_models(args.model_repository, repository, args.threads)
    local = {bls: in_process(repository, bls, args.threads) for bls in FAMILIES.values()}
    config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
    cells = []
    with TritonServer(config) as server:
        for beam, level in itertools.product(args.beams, args.concurrency):
            pairs = pairs_all[: max(args.min_sentences, level * args.sentences_per_client)]
            for label, bls in FAMILIES.items():
                batcher = MicroBatcher(batch_engine(local[bls]), beam)
                calls = [batcher] * level
                cells.append(measure(label, "in-process", calls, beam, pairs, count_tokens))
                batcher.close()
                clients = [TritonClient(server.grpc_url) for _ in range(level)]
                calls = [_served(c, bls, beam) for c in clients]
                cells.append(measure(label, "Triton", calls, beam, pairs, count_tokens))
                for triton in clients:
                    triton.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return cells


def _served(triton, model: str, beam: int) -> Translate:
    return lambda text: triton.translate(text, beam_size=beam, model=model)[0]


def report(cells: list[Cell], args, seconds: float, machine: str) -> str:
    rows = [
        [
            c.model,
            c.engine,
            c.beam,
            c.concurrency,
            len(c.latencies_s),
            round(c.sentences_per_s, 1),
            round(c.tokens / c.wall_s),
            round(c.ms(50), 1),
            round(c.ms(95), 1),
            round(c.ms(99), 1),
            f"{c.exact:.3f}",
        ]
        for c in cells
    ]
    by_key = {(c.model, c.engine, c.beam, c.concurrency): c for c in cells}
    ratios = []
    for beam, level in itertools.product(args.beams, args.concurrency):
        rnn = [
            by_key[("GRU + attention (nmt_rnn)", e, beam, level)] for e in ("in-process", "Triton")
        ]
        tf = [by_key[("transformer (nmt)", e, beam, level)] for e in ("in-process", "Triton")]
        ratios.append(
            [
                beam,
                level,
                f"{rnn[1].sentences_per_s / rnn[0].sentences_per_s:.2f}",
                f"{tf[1].sentences_per_s / tf[0].sentences_per_s:.2f}",
                f"{rnn[0].sentences_per_s / tf[0].sentences_per_s:.2f}",
                f"{rnn[1].sentences_per_s / tf[1].sentences_per_s:.2f}",
            ]
        )
    headers = ["model", "engine", "beam", "concurrency", "sentences", "sentences/s"]
    headers += ["tokens/s", "p50 ms", "p95 ms", "p99 ms", "exact match"]
    ratio_headers = ["beam", "concurrency", "RNN served / in-process"]
    ratio_headers += ["Transformer served / in-process", "RNN / Transformer in-process"]
    ratio_headers += ["RNN / Transformer served"]
    return "\n".join(
        [
            report_header(
                "NMT benchmark: recurrent (nmt_rnn) beside the Transformer (nmt)",
                command="python -m triton_kit.benchmarks.nmt --architecture rnn",
                load=f"one run of the matrix in {seconds:.0f} s; the machine is shared with "
                "other jobs, so compare ratios within this run, not absolute figures across runs",
                machine=machine,
            ),
            "- Models: assets/nmt-en-fr-numbers (Marian 3+3 layers, d_model 128) and "
            "assets/nmt-rnn-en-fr-numbers (bidirectional GRU encoder, GRU decoder, hidden "
            "192, Luong attention), same vocabulary and held-out numbers, same search code.",
            "- in-process: python_models.nmt.decode on ONNX Runtime sessions of the served "
            "ONNX files, with a micro-batcher (batches of at most "
            f"{MAX_BATCH}); Triton: the BLS model through the gRPC SDK, one sentence a "
            f"request. Every ONNX model runs with {args.threads} intra-op thread(s).",
            "- Closed loops; one run of the matrix (no repeats); tokens/s counts target "
            "pieces + `</s>`; exact match against num2words.",
            "",
            "## Ratios (sentences/s)",
            "",
            markdown_table(ratio_headers, ratios),
            "",
            "## Notes",
            "",
            "- The served/in-process gap is the per-step cost of serving: the BLS model calls "
            "the decoder model once per generated token through Triton. The recurrent "
            "decoder step is cheaper than the Transformer's, so that fixed cost weighs more "
            "on it; moving the decoder into the search model's process (issue 11) removes "
            "most of it for both.",
            "",
            "## All measurements",
            "",
            markdown_table(headers, rows),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.nmt --architecture rnn", description=__doc__
    )
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--concurrency", type=_ints, default=(1, 8, 32))
    parser.add_argument("--beams", type=_ints, default=(1, 4))
    parser.add_argument("--min-sentences", type=int, default=192)
    parser.add_argument("--sentences-per-client", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, default=RESULTS / "nmt_rnn.md")
    args = parser.parse_args(argv)
    machine, started = machine_description(), time.perf_counter()
    cells = run(args)
    args.output.write_text(report(cells, args, time.perf_counter() - started, machine))
    print(f"wrote {args.output}")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


if __name__ == "__main__":
    main()
