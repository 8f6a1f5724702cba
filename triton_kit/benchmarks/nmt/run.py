"""NMT: in-process search vs Triton-served vs CTranslate2, one run, two model sizes.

Engines, CPU only, on English number phrases from the held-out split:
- in-process ORT: the served search (python_models.nmt.decode) on ONNX Runtime
  sessions of the same ONNX files Triton loads, timed per phase (encoder, decoder
  steps, search);
- Triton: the ``nmt`` python model through the gRPC SDK, one sentence a request; its
  search runs the same ONNX files in-process; Triton's own statistics per cell;
- CTranslate2 float32 and int8, converted from the same checkpoint.

Sizes: ``tiny``, the default number model (3+3 layers, d_model 128), exact match
against num2words; ``large``, a random Marian of opus-mt-en-de's shape
(triton_kit/benchmarks/nmt/large.py: 6+6 layers, d_model 512, 58,101 tokens), speed only,
agreement with the in-process output. Closed loops at each concurrency; the
in-process engines get the batching Triton's dynamic batcher gives the python model
(a worker gathers every queued request into one decode call). Writes benchmarks/results/nmt.md.

:func:`step_model_throughput` measures the same search on any StepModel (the GPU
benchmark's torch engine: ``triton_kit.build_engines.families.nmt.torchscript.steps.step_model``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import itertools
import os
import queue
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import sentencepiece as spm

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import machine_description, markdown_table
from triton_kit.benchmarks.nmt.report import (
    CT2_FP32,
    CT2_INT8,
    IN_ENGINE,
    IN_PROCESS,
    IN_PROCESS_INT8,
    IN_PROCESS_TORCH,
    IN_PROCESS_TORCH_INT8,
    TRITON,
    TRITON_GRAPH,
    TRITON_INT8,
    TRITON_TORCH,
    TRITON_TORCH_INT8,
    render,
)
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.repository import parse
from triton_kit.build_engines.repository import render as render_config

ROOT = Path(__file__).resolve().parents[3]
MODELS = ("nmt", "nmt_encoder", "nmt_decoder", "nmt_generate")  # the last where built
MAX_BATCH = 32
ENGINES = (IN_PROCESS, CT2_FP32, CT2_INT8, TRITON)
# The generation graph (--search engine: ONNX Runtime's BeamSearch in a Loop over the rows,
# nmt_generate): in process one call per micro-batch, and served by Triton's own onnxruntime
# backend, the nmt model calling it by BLS once per batch (sizes in --graph-sizes)
GRAPH_ENGINES = (IN_ENGINE, TRITON_GRAPH)
GRAPH_ARGS = ("--search", "engine")
# The same search on the build's ``--precision int8-dynamic`` ONNX files (sizes in --int8-sizes)
INT8_ENGINES = (IN_PROCESS_INT8, TRITON_INT8)
INT8_PRECISION = "int8-dynamic"
# The whole generation as one TorchScript module (--engine torch --search engine): in process,
# and served by Triton's own pytorch backend (sizes in --torch-generate-sizes)
TORCH_ENGINES = (IN_PROCESS_TORCH, TRITON_TORCH)
TORCH_INT8_ENGINES = (IN_PROCESS_TORCH_INT8, TRITON_TORCH_INT8)  # sizes in --torch-int8-sizes
TORCH_GENERATE_ARGS = ("--engine", "torch", "--search", "engine")

PLACEHOLDER = re.compile(r"<x\d+>")
ARCHITECTURES = ("transformer", "rnn")  # rnn: benchmarks.nmt.rnn

# texts, beam, on_done(index, text) -> None
BatchFn = Callable[[Sequence[str], int, Callable[[int, str], None]], None]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.nmt", description=__doc__
    )
    parser.add_argument(
        "--architecture",
        choices=ARCHITECTURES,
        default="transformer",
        help="transformer: this benchmark (nmt); rnn: the recurrent model's (nmt_rnn beside "
        "nmt, triton_kit.benchmarks.nmt.rnn, with its own flags: --architecture rnn --help)",
    )
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--sizes", default="tiny,large", help="tiny, large or both")
    parser.add_argument("--concurrency", default="1,8,32", help="tiny model")
    parser.add_argument("--large-concurrency", default="8,32")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument(
        "--sentences-per-client",
        type=int,
        default=12,
        help="tiny: sentences per concurrent client (at least --min-sentences per cell)",
    )
    parser.add_argument("--min-sentences", type=int, default=192)
    parser.add_argument("--large-sentences", type=int, default=64, help="per cell")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="tiny: measure the matrix this many times (engine order rotated); keep medians",
    )
    parser.add_argument("--large-repeats", type=int, default=1)
    parser.add_argument(
        "--torch-generate-sizes",
        default="tiny,large",
        help="sizes also measured with the whole generation in one TorchScript module "
        "(--engine torch --search engine), in process and served by Triton's pytorch backend "
        "('' for none)",
    )
    parser.add_argument(
        "--graph-sizes",
        default="tiny",
        help="sizes also measured with the whole search in ONNX Runtime's BeamSearch graph "
        "(--search engine), in process and served by Triton's onnxruntime backend ('' for none)",
    )
    parser.add_argument(
        "--torch-int8-sizes",
        default="tiny",
        help="sizes also measured with the TorchScript search at --precision int8-dynamic "
        "(the build refuses the large model's random weights: int8 flips their near-ties) "
        "('' for none)",
    )
    parser.add_argument(
        "--int8-sizes",
        default="tiny,large",
        help="sizes also measured on a --precision int8-dynamic build, in process and served "
        "('' for none)",
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
    parser.add_argument("--output", type=Path, default=RESULTS / "nmt.md")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Cell:
    engine: str
    beam: int
    concurrency: int
    latencies_s: tuple[float, ...]
    wall_s: float
    tokens: int
    outputs: tuple[str, ...]
    exact: float | None  # against the reference translations, where there are some
    phases: dict[str, float] = field(default_factory=dict)  # where the time went

    @property
    def sentences_per_s(self) -> float:
        return len(self.latencies_s) / self.wall_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s

    def ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000)


class MicroBatcher:
    """Gathers concurrent requests into one batch call, like Triton's dynamic batcher."""

    def __init__(self, run: BatchFn, beam: int) -> None:
        self.run, self.beam = run, beam
        self.queue: queue.Queue[tuple[str, Future] | None] = queue.Queue()
        self.worker = threading.Thread(target=self._loop, daemon=True)
        self.worker.start()

    def __call__(self, text: str) -> str:
        future: Future = Future()
        self.queue.put((text, future))
        return future.result()

    def close(self) -> None:
        self.queue.put(None)
        self.worker.join()

    def _loop(self) -> None:
        while (first := self.queue.get()) is not None:
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self.queue.put(None)
                    break
                batch.append(item)
            futures = [f for _, f in batch]
            try:
                self.run([t for t, _ in batch], self.beam, partial(_resolve, futures))
            except Exception as error:  # the callers get it; a dead worker would hang them
                for future in futures:
                    if not future.done():
                        future.set_exception(error)


def _resolve(futures: list[Future], index: int, text: str) -> None:
    futures[index].set_result(text)


class PhaseTimer:
    """A StepModel wrapper that adds up the time of each phase of the search."""

    def __init__(self, model) -> None:
        from triton_kit.python_models.nmt.timing import TimedStepModel

        self.reset()
        timed = TimedStepModel(model, self._add)
        self.encode, self.step = timed.encode, timed.step
        self.reorders = timed.reorders  # the step gathers the cache by beam (nmt_decode)
        for own in ("take", "candidates"):  # the model's, where it has them (a torch device)
            if hasattr(timed, own):
                setattr(self, own, getattr(timed, own))

    def reset(self) -> None:
        self.encode_s = self.step_s = self.total_s = 0.0
        self.steps = self.calls = self.sentences = 0
        self.search_parts_s: dict[str, float] = {"candidates": 0.0, "take": 0.0}

    def _add(self, phase: str, seconds: float) -> None:
        if phase == "encode":
            self.encode_s += seconds
        elif phase == "step":
            self.step_s += seconds
            self.steps += 1
        else:  # parts of the search the model does: counted in "search" too
            self.search_parts_s[phase] += seconds

    def phases(self) -> dict[str, float]:
        """Per decode call and per step, in ms; the search is what is left of ``generate``."""
        if not self.calls:
            return {}
        search = self.total_s - self.encode_s - self.step_s
        return {
            "batch": self.sentences / self.calls,
            "encoder share": self.encode_s / self.total_s,
            "decoder share": self.step_s / self.total_s,
            "encoder ms/call": 1000 * self.encode_s / self.calls,
            "decoder ms/step": 1000 * self.step_s / max(self.steps, 1),
            "search ms/step": 1000 * search / max(self.steps, 1),
            "search share": search / self.total_s,
            **{
                f"{part} ms/step": 1000 * seconds / max(self.steps, 1)
                for part, seconds in self.search_parts_s.items()
            },
            "ms/sentence": 1000 * self.total_s / self.sentences,
        }


@dataclass(frozen=True)
class Served:
    """What the search needs from a repository's ``nmt`` model, read as the server reads it."""

    settings: object
    limits: object
    text: object

    @classmethod
    def load(cls, repository: Path) -> Served:
        from triton_kit.python_models.common.parameters import ModelParameters
        from triton_kit.python_models.nmt.settings import from_parameters
        from triton_kit.python_models.nmt.text import MarianText

        config = parse((repository / "nmt" / "config.pbtxt").read_text())
        params = ModelParameters({k: v.string_value for k, v in config.parameters.items()})
        settings, limits = from_parameters(params)
        return cls(settings, limits, MarianText(repository / "nmt" / "1", limits.max_source_length))


def search_engine(step_model, served: Served) -> tuple[BatchFn, PhaseTimer]:
    """The served search on any StepModel, as a batch function, with its phase timer."""
    from triton_kit.python_models.nmt.decode import Job, generate

    timer = PhaseTimer(step_model)
    max_length = served.limits.default_max_length

    def run(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
        jobs = [Job(served.text.encode(t), beam, max_length) for t in texts]
        start = time.perf_counter()
        generate(timer, jobs, served.settings, lambda i, ids: done(i, served.text.decode(ids)))
        timer.total_s += time.perf_counter() - start
        timer.calls += 1
        timer.sentences += len(texts)

    return run, timer


def graph_engine(repository: Path, served: Served, threads: int) -> BatchFn:
    """The served ``nmt_generate`` graph (ONNX Runtime's BeamSearch in a Loop over the rows) in
    process, one call per micro-batch, as ``nmt``'s BLS call makes it."""
    from triton_kit.python_models.common.ort_session import SessionSettings, create_session
    from triton_kit.python_models.nmt.decode import Job
    from triton_kit.python_models.nmt.generate import GRAPH_OUTPUT, generate_graph

    path = repository / "nmt_generate" / "1" / "model.onnx"
    session = create_session(path, SessionSettings(intra_op_threads=threads, inter_op_threads=1))
    settings, max_length = served.settings, served.limits.default_max_length
    tokens = (settings.eos_token_id, settings.pad_token_id, settings.forced_eos)

    def call(feeds: dict[str, np.ndarray]) -> np.ndarray:
        return session.run([GRAPH_OUTPUT], feeds)[0]

    def run(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
        jobs = [Job(served.text.encode(t), beam, max_length) for t in texts]
        generate_graph(
            call,
            jobs,
            tokens,
            settings.length_penalty,
            lambda i, ids: done(i, served.text.decode(ids)),
        )

    return run


class CallTimer:
    """Batch size and ms/sentence of a batch engine with no steps to time (one call a batch)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total_s, self.calls, self.sentences = 0.0, 0, 0

    def timed(self, run: BatchFn) -> BatchFn:
        def timed_run(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
            start = time.perf_counter()
            run(texts, beam, done)
            self.total_s += time.perf_counter() - start
            self.calls += 1
            self.sentences += len(texts)

        return timed_run

    def phases(self) -> dict[str, float]:
        if not self.calls:
            return {}
        return {
            "batch": self.sentences / self.calls,
            "ms/sentence": 1000 * self.total_s / self.sentences,
        }


def torch_generate_engine(repository: Path, served: Served, threads: int = 1) -> BatchFn:
    """The served ``nmt_generate`` TorchScript (``--engine torch --search engine``) in
    process: loaded as Triton's pytorch backend loads it, on the device and JIT executor its
    config names (``threads`` intra-op threads on a CPU), one call per batch as ``nmt``'s BLS
    call makes it."""
    import torch

    from triton_kit.build_engines.engines.torchscript.config import optimized_execution
    from triton_kit.build_engines.families.nmt.torchscript.generate import generate
    from triton_kit.python_models.common.sibling import sibling_device
    from triton_kit.python_models.nmt.decode import Job

    device = sibling_device(repository / "nmt" / "1", "nmt_generate")
    module = torch.jit.load(str(repository / "nmt_generate" / "1" / "model.pt"), device)
    config = parse((repository / "nmt_generate" / "config.pbtxt").read_text())
    optimized = optimized_execution(config)
    max_length = served.limits.default_max_length

    if device == "cpu":
        torch.set_num_threads(threads)

    def run(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
        jobs = [Job(served.text.encode(t), beam, max_length) for t in texts]
        # under the executor its config names, as Triton's pytorch backend runs it
        with torch.jit.optimized_execution(optimized):
            generate(module, jobs, lambda i, ids: done(i, served.text.decode(ids)))

    return run


def ort_step_model(repository: Path, threads: int):
    from triton_kit.python_models.nmt.ort import OrtStepModel

    return OrtStepModel(
        repository / "nmt_encoder" / "1" / "model.onnx",
        repository / "nmt_decoder" / "1" / "model.onnx",
        threads,
    )


# CTranslate2 ends a beam search once beam_size x patience hypotheses have finished (HF's
# early_stopping=True); these checkpoints' generation configs say early_stopping=False (HF
# goes on while a running beam can still win). With patience 1 the search returned degenerate
# early finishers for 14-19 % of sentences; with 2 it returns HF's translations.
CT2_PATIENCE = 2


def ctranslate2_engine(
    checkpoint: Path, quantization: str, workdir: Path, threads: int, max_length: int
) -> BatchFn:
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    output = workdir / f"ct2-{checkpoint.name}-{quantization}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TransformersConverter(str(checkpoint)).convert(str(output), quantization=quantization)
    translator = ctranslate2.Translator(
        str(output), device="cpu", compute_type=quantization, intra_threads=threads
    )
    source = spm.SentencePieceProcessor(model_file=str(checkpoint / "source.spm"))

    def run(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
        tokens = [[*source.encode(t, out_type=str), "</s>"] for t in texts]
        results = translator.translate_batch(
            tokens, beam_size=beam, max_decoding_length=max_length - 1, patience=CT2_PATIENCE
        )
        for index, result in enumerate(results):
            done(index, "".join(result.hypotheses[0]).replace("\u2581", " ").strip())

    return run


def measure(
    engine: str,
    call_factory: Callable[[], Callable[[str], str]],
    beam: int,
    concurrency: int,
    pairs: list[tuple[str, str | None]],
    count_tokens: Callable[[str], int],
    after_warmup: Callable[[], object] | None = None,
) -> Cell:
    """``concurrency`` client threads, each with its own ``call``, share ``pairs``."""
    calls = [call_factory() for _ in range(concurrency)]
    for call in calls[:2]:
        call(pairs[0][0])  # warm-up
    if after_warmup is not None:
        after_warmup()
    counter = itertools.count()
    latencies: list[float] = []
    outputs: dict[int, str] = {}
    lock = threading.Lock()

    def client(call: Callable[[str], str]) -> None:
        while (index := next(counter)) < len(pairs):
            start = time.perf_counter()
            out = call(pairs[index][0])
            with lock:
                latencies.append(time.perf_counter() - start)
                outputs[index] = out

    threads = [threading.Thread(target=client, args=(c,)) for c in calls]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    texts = tuple(outputs[i] for i in range(len(pairs)))
    exact = None
    if pairs[0][1] is not None:
        exact = float(np.mean([t == ref for t, (_, ref) in zip(texts, pairs, strict=True)]))
    tokens = sum(count_tokens(t) for t in texts)
    return Cell(engine, beam, concurrency, tuple(latencies), wall, tokens, texts, exact)


def batcher_factory(run: BatchFn, beam: int, created: list[MicroBatcher]):
    batcher = MicroBatcher(run, beam)
    created.append(batcher)
    return lambda: batcher


def measure_local(name: str, engine: BatchFn, beam: int, level: int, pairs, count_tokens) -> Cell:
    created: list[MicroBatcher] = []
    cell = measure(name, batcher_factory(engine, beam, created), beam, level, pairs, count_tokens)
    for batcher in created:
        batcher.close()
    return cell


def step_model_throughput(
    factory: Callable[[], object],
    repository: Path = ROOT / "model_repository",
    beam: int = 4,
    levels: Sequence[int] = (1, 8, 32),
    sentences: int = 192,
    checkpoint: Path = DEFAULT_CHECKPOINT,
) -> list[Cell]:
    """Sentences/s of the served search on ``factory()``'s StepModel at each concurrency.

    For the GPU benchmark: ``factory`` may return
    ``triton_kit.build_engines.families.nmt.torchscript.steps.step_model(checkpoint, "cuda")`` (or
    the ORT one); ``repository`` holds the ``nmt`` model whose decode settings and tokenizer to use
    (the default model's, or ``triton_kit.benchmarks.nmt.large.build_repository``'s). Cells carry
    the phase times (encoder, decoder per step, search per step) and exact match where the
    checkpoint has a held-out split.
    """
    served = Served.load(repository)
    run, timer = search_engine(factory(), served)
    return engine_throughput(run, repository, beam, levels, sentences, checkpoint, timer)


def engine_throughput(
    run: BatchFn,
    repository: Path,
    beam: int,
    levels: Sequence[int],
    sentences: int,
    checkpoint: Path,
    timer: PhaseTimer | None = None,
) -> list[Cell]:
    """Sentences/s of any batch engine behind the micro-batcher, at each concurrency."""
    pairs = held_out_pairs(with_references=(checkpoint / "split.json").exists())
    count = count_tokens_for(repository)
    cells = []
    for level in levels:
        if timer is not None:
            timer.reset()
        cell = measure_local("in-process", run, beam, level, pairs[:sentences], count)
        cells.append(cell if timer is None else _with_phases(cell, timer.phases()))
    return cells


def held_out_pairs(with_references: bool = True) -> list[tuple[str, str | None]]:
    """The default model's held-out English sources (and French references)."""
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [(corpus.english(n), corpus.french(n) if with_references else None) for n in split.test]


def count_tokens_for(repository: Path) -> Callable[[str], int]:
    """Target tokens + ``</s>``; the large model's placeholder pieces (``<x123>``) count one."""
    target = spm.SentencePieceProcessor(model_file=str(repository / "nmt" / "1" / "target.spm"))

    def count(text: str) -> int:
        placeholders = len(PLACEHOLDER.findall(text))
        rest = PLACEHOLDER.sub("", text)
        return placeholders + (len(target.encode(rest)) if rest.strip() else 0) + 1

    return count


def _with_phases(cell: Cell, phases: dict[str, float]) -> Cell:
    return dataclasses.replace(cell, phases=phases)


def triton_factory(url: str, beam: int, created: list):
    from triton_kit.client import TritonClient

    def make() -> Callable[[str], str]:
        triton = TritonClient(url)
        created.append(triton)
        return lambda text: triton.translate(text, beam_size=beam)[0]

    return make


ENGINE_MODEL = "nmt_generate"  # the whole search's engine, where the build wrote one


class TritonStats:
    """The ``nmt`` model's counters from Triton's statistics API, differenced per cell, and
    those of the engine it calls (``nmt_generate``) where the repository serves one."""

    def __init__(self, grpc_url: str) -> None:
        # gRPC, not HTTP: tritonclient.http needs gevent, which the lent GPU machine lacks.
        import tritonclient.grpc as grpcclient

        self.client = grpcclient.InferenceServerClient(grpc_url.split("://", 1)[-1])

    def _model(self, name: str) -> dict | None:
        from tritonclient.utils import InferenceServerException

        try:
            reply = self.client.get_inference_statistics(model_name=name, as_json=True)
        except InferenceServerException:  # not in this repository
            return None
        (stats,) = reply["model_stats"]
        return stats

    def snapshot(self) -> dict[str, float]:
        stats = self._model("nmt")
        assert stats is not None
        inference = stats.get("inference_stats", {})
        snap = {
            "requests": _ns(inference.get("success", {}), "count"),
            "queue": _ns(inference.get("queue", {})),  # summed over requests
            "executions": float(stats.get("execution_count", 0)),
            "compute": _compute(stats),
        }
        engine = self._model(ENGINE_MODEL)
        if engine is not None:
            snap["engine executions"] = float(engine.get("execution_count", 0))
            snap["engine compute"] = _compute(engine)
        return snap

    @staticmethod
    def phases(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        diff = {key: after[key] - before[key] for key in after}
        requests, executions = diff["requests"], max(diff["executions"], 1.0)
        phases = {
            "batch": requests / executions,
            "queue ms/request": diff["queue"] / requests / 1e6,
            "compute ms/execution": diff["compute"] / executions / 1e6,
            "ms/sentence": diff["compute"] / requests / 1e6,
        }
        if "engine compute" in diff:
            phases["engine calls/execution"] = diff["engine executions"] / executions
            phases["engine ms/sentence"] = diff["engine compute"] / requests / 1e6
        return phases


def _ns(counter: dict, field: str = "ns") -> float:  # proto JSON leaves zeros out
    return float(counter.get(field, 0))


def _compute(stats: dict) -> float:
    """compute_infer summed per execution (batch_stats), not per request: one run a batch."""
    return sum(_ns(b.get("compute_infer", {})) for b in stats.get("batch_stats", []))


def measure_triton(server, beam: int, level: int, pairs, count_tokens, name: str = TRITON) -> Cell:
    clients: list = []
    stats = TritonStats(server.grpc_url)
    before: list[dict[str, float]] = []
    factory = triton_factory(server.grpc_url, beam, clients)
    cell = measure(
        name, factory, beam, level, pairs, count_tokens, lambda: before.append(stats.snapshot())
    )
    cell = _with_phases(cell, TritonStats.phases(before[0], stats.snapshot()))
    for triton in clients:
        triton.close()
    return cell


def copy_models(source: Path, target: Path, threads: int) -> None:
    """The served models, with the same intra-op thread budget as the in-process engines."""
    for name in MODELS:
        if not (source / name).is_dir():
            continue
        shutil.copytree(source / name, target / name)
        config_file = target / name / "config.pbtxt"
        config = parse(config_file.read_text())
        config.parameters["intra_op_thread_count"].string_value = str(threads)
        if name != "nmt":
            config.parameters["inter_op_thread_count"].string_value = "1"
        config_file.write_text(render_config(config))


@dataclass(frozen=True)
class Suite:
    """One model size: its served repository, checkpoint, sentences and matrix."""

    name: str
    repository: Path
    checkpoint: Path
    pairs: list[tuple[str, str | None]]
    beams: list[int]
    levels: list[int]
    repeats: int
    sentences: Callable[[int], int]  # per cell, from the concurrency
    int8_repository: Path | None = None  # the --precision int8-dynamic build, if measured
    torch_repository: Path | None = None  # the --engine torch --search engine build, if measured
    torch_int8_repository: Path | None = None  # the same at --precision int8-dynamic
    graph_repository: Path | None = None  # the --search engine build (ONNX Runtime), if measured

    @property
    def engines(self) -> tuple[str, ...]:
        graph = GRAPH_ENGINES if self.graph_repository is not None else ()
        int8 = INT8_ENGINES if self.int8_repository is not None else ()
        torch = TORCH_ENGINES if self.torch_repository is not None else ()
        torch_int8 = TORCH_INT8_ENGINES if self.torch_int8_repository is not None else ()
        return ENGINES + graph + int8 + torch + torch_int8


def variant_repository(
    checkpoint: Path, workdir: Path, size: str, threads: int, variant: str, **build
) -> Path:
    """Another build of the checkpoint (``build``:
    :func:`triton_kit.benchmarks.nmt.large.build_repository`'s ``precision`` or
    ``engine_args``), served with the same thread budget as the others."""
    from triton_kit.benchmarks.nmt import large as nmt_large

    built = nmt_large.build_repository(
        checkpoint,
        workdir / f"{size}-built-{variant}",
        workdir / f"{size}-work-{variant}",
        threads,
        **build,
    )
    repository = workdir / f"repository-{size}-{variant}"
    copy_models(built, repository, threads)
    return repository


def torch_repository(
    checkpoint: Path, workdir: Path, size: str, threads: int, precision: str = "fp32"
) -> Path:
    """The build's TorchScript search (``nmt_generate``) at ``precision``."""
    return variant_repository(
        checkpoint,
        workdir,
        size,
        threads,
        f"torch-{precision}",
        precision=precision,
        engine_args=TORCH_GENERATE_ARGS,
    )


def graph_repository(checkpoint: Path, workdir: Path, size: str, threads: int) -> Path:
    """The build's ``--search engine`` (ONNX Runtime's BeamSearch graph, ``nmt_generate``)."""
    return variant_repository(checkpoint, workdir, size, threads, "graph", engine_args=GRAPH_ARGS)


def int8_repository(checkpoint: Path, workdir: Path, size: str, threads: int) -> Path:
    """The build's ``--precision int8-dynamic`` models."""
    return variant_repository(checkpoint, workdir, size, threads, "int8", precision=INT8_PRECISION)


def suites(args: argparse.Namespace, workdir: Path) -> list[Suite]:
    beams = [int(b) for b in args.beams.split(",")]
    int8_sizes = [s for s in args.int8_sizes.split(",") if s]
    torch_sizes = [s for s in args.torch_generate_sizes.split(",") if s]
    torch_int8_sizes = [s for s in args.torch_int8_sizes.split(",") if s]
    graph_sizes = [s for s in args.graph_sizes.split(",") if s]
    found = []
    for size in args.sizes.split(","):
        repository = workdir / f"repository-{size}"
        if size == "tiny":
            copy_models(args.model_repository, repository, args.threads)
            levels = [int(c) for c in args.concurrency.split(",")]
            pairs = held_out_pairs()

            def count(level: int) -> int:
                return max(args.min_sentences, level * args.sentences_per_client)

            int8 = None
            if size in int8_sizes:
                int8 = int8_repository(args.checkpoint, workdir, size, args.threads)
            torch_repo = None
            if size in torch_sizes:
                torch_repo = torch_repository(args.checkpoint, workdir, size, args.threads)
            torch_int8 = None
            if size in torch_int8_sizes:
                torch_int8 = torch_repository(
                    args.checkpoint, workdir, size, args.threads, INT8_PRECISION
                )
            graph = None
            if size in graph_sizes:
                graph = graph_repository(args.checkpoint, workdir, size, args.threads)
            found.append(
                Suite(
                    size,
                    repository,
                    args.checkpoint,
                    pairs,
                    beams,
                    levels,
                    args.repeats,
                    count,
                    int8,
                    torch_repo,
                    torch_int8,
                    graph,
                )
            )
        elif size == "large":
            from triton_kit.benchmarks.nmt import large as nmt_large

            vocab = args.large_vocab or nmt_large.OPUS_MT_EN_DE_VOCAB
            checkpoint = nmt_large.write_checkpoint(workdir / "large-checkpoint", vocab)
            built = nmt_large.build_repository(
                checkpoint, workdir / "large-built", workdir / "large-work", args.threads
            )
            copy_models(built, repository, args.threads)
            int8 = None
            if size in int8_sizes:
                int8 = int8_repository(checkpoint, workdir, size, args.threads)
            torch_repo = None
            if size in torch_sizes:
                torch_repo = torch_repository(checkpoint, workdir, size, args.threads)
            torch_int8 = None
            if size in torch_int8_sizes:
                torch_int8 = torch_repository(
                    checkpoint, workdir, size, args.threads, INT8_PRECISION
                )
            graph = None
            if size in graph_sizes:
                graph = graph_repository(checkpoint, workdir, size, args.threads)
            levels = [int(c) for c in args.large_concurrency.split(",")]
            pairs = held_out_pairs(with_references=False)
            found.append(
                Suite(
                    size,
                    repository,
                    checkpoint,
                    pairs,
                    beams,
                    levels,
                    args.large_repeats,
                    lambda _level: args.large_sentences,
                    int8,
                    torch_repo,
                    torch_int8,
                    graph,
                )
            )
        else:
            raise SystemExit(f"--sizes: unknown size {size!r} (tiny, large)")
    return found


def run_suite(suite: Suite, workdir: Path, threads: int) -> list[Cell]:
    from triton_kit.server import ServerConfig, TritonServer

    served = Served.load(suite.repository)
    max_length = served.limits.default_max_length
    local, timer = search_engine(ort_step_model(suite.repository, threads), served)
    engines: dict[str, BatchFn] = {
        IN_PROCESS: local,
        CT2_FP32: ctranslate2_engine(suite.checkpoint, "float32", workdir, threads, max_length),
        CT2_INT8: ctranslate2_engine(suite.checkpoint, "int8", workdir, threads, max_length),
    }
    timers: dict[str, PhaseTimer | CallTimer] = {IN_PROCESS: timer}
    repositories = {TRITON: suite.repository}
    if suite.graph_repository is not None:
        graph_timer = CallTimer()
        timers[IN_ENGINE] = graph_timer
        engines[IN_ENGINE] = graph_timer.timed(
            graph_engine(suite.graph_repository, Served.load(suite.graph_repository), threads)
        )
        repositories[TRITON_GRAPH] = suite.graph_repository
    if suite.int8_repository is not None:
        int8 = Served.load(suite.int8_repository)
        step_model = ort_step_model(suite.int8_repository, threads)
        engines[IN_PROCESS_INT8], timers[IN_PROCESS_INT8] = search_engine(step_model, int8)
        repositories[TRITON_INT8] = suite.int8_repository
    torch_builds = (
        (IN_PROCESS_TORCH, TRITON_TORCH, suite.torch_repository),
        (IN_PROCESS_TORCH_INT8, TRITON_TORCH_INT8, suite.torch_int8_repository),
    )
    for local_name, served_name, torch_repo in torch_builds:
        if torch_repo is None:
            continue
        call_timer = CallTimer()
        timers[local_name] = call_timer
        engines[local_name] = call_timer.timed(
            torch_generate_engine(torch_repo, Served.load(torch_repo), threads)
        )
        repositories[served_name] = torch_repo
    count_tokens = count_tokens_for(suite.repository)
    runs: dict[tuple[str, int, int], list[Cell]] = {}
    engine_names = tuple(name for name in suite.engines if name in engines or name in repositories)
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                TritonServer(
                    ServerConfig(model_repository=path, http_port=0, grpc_port=0, metrics_port=0)
                )
            )
            for name, path in repositories.items()
        }
        for repeat in range(suite.repeats):
            shift = repeat % len(engine_names)
            order = engine_names[shift:] + engine_names[:shift]
            for beam, level in itertools.product(suite.beams, suite.levels):
                pairs = suite.pairs[: suite.sentences(level)]
                for name in order:
                    if name in servers:
                        cell = measure_triton(servers[name], beam, level, pairs, count_tokens, name)
                    else:
                        for each in timers.values():
                            each.reset()
                        cell = measure_local(name, engines[name], beam, level, pairs, count_tokens)
                        if name in timers:
                            cell = _with_phases(cell, timers[name].phases())
                    runs.setdefault((name, beam, level), []).append(_report(suite.name, cell))
    cells = [
        median_cell(runs[(name, beam, level)])
        for beam, level in itertools.product(suite.beams, suite.levels)
        for name in engine_names
    ]
    return cells if suite.pairs[0][1] is not None else _with_agreement(cells)


PROFILE_ROWS = (1, 16, 64)  # one sentence at c1; the batches the c8/c32 cells form


def decoder_profiles(suite: Suite, threads: int) -> list:
    """ONNX Runtime's own profile of the suite's served decoder step, per precision."""
    from triton_kit.benchmarks.nmt.profile import profile_decoder

    files = {"fp32": suite.repository, "int8": suite.int8_repository}
    return [
        profile_decoder(
            repo / "nmt_decoder" / "1" / "model.onnx", f"{suite.name} {p}", rows, threads
        )
        for p, repo in files.items()
        if repo is not None
        for rows in PROFILE_ROWS
    ]


def _with_agreement(cells: list[Cell]) -> list[Cell]:
    """No references (random weights): agreement with the in-process output instead."""
    reference = {(c.beam, c.concurrency): c.outputs for c in cells if c.engine == IN_PROCESS}

    def same(output: str, expected: str) -> bool:
        """Token for token over the reference's length: at the limit HF forces ``</s>`` (not
        in the text) where CTranslate2 emits one more token."""
        ours, theirs = PLACEHOLDER.findall(expected), PLACEHOLDER.findall(output)
        return output == expected or (bool(ours) and theirs[: len(ours)] == ours)

    def agreement(cell: Cell) -> float:
        pairs = zip(cell.outputs, reference[(cell.beam, cell.concurrency)], strict=True)
        return float(np.mean([same(a, b) for a, b in pairs]))

    return [dataclasses.replace(c, exact=agreement(c)) for c in cells]


def median_cell(cells: list[Cell]) -> Cell:
    """The repeat with the median throughput (its latencies and phases come with it)."""
    return sorted(cells, key=lambda c: c.sentences_per_s)[len(cells) // 2]


def _report(size: str, cell: Cell) -> Cell:
    phases = " ".join(f"{k}={v:.3g}" for k, v in cell.phases.items())
    print(
        f"{size:5s} {cell.engine:18s} beam {cell.beam} c={cell.concurrency:<3d} "
        f"{cell.sentences_per_s:7.1f} sent/s p50 {cell.ms(50):7.1f} ms  {phases}",
        flush=True,
    )
    return cell


def main(argv: list[str] | None = None) -> None:
    """``--architecture rnn`` runs the recurrent model's benchmark (benchmarks.nmt.rnn: nmt_rnn
    beside nmt, its own flags and report); the Transformer's is this module's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    front = argparse.ArgumentParser(add_help=False)
    front.add_argument("--architecture", choices=ARCHITECTURES, default="transformer")
    known, rest = front.parse_known_args(argv)
    if known.architecture == "rnn":
        from triton_kit.benchmarks.nmt import rnn

        rnn.main(rest)
        return
    args = parse_args(argv)
    machine = machine_description()
    load_start = os.getloadavg()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="nmt-bench-"))
    try:
        results, profiles = {}, []
        for suite in suites(args, workdir):
            results[suite.name] = run_suite(suite, workdir, args.threads)
            profiles += decoder_profiles(suite, args.threads)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    text = render(
        results,
        command="python -m triton_kit.benchmarks.nmt " + shlex.join(argv),
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
