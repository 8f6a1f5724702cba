"""The NMT benchmark's in-process engines, each as a batch function behind the micro-batcher:
the served Python search on ONNX Runtime sessions of the served step files (timed per phase),
the ``--search engine`` builds' whole search (ONNX Runtime's BeamSearch graph, or the
TorchScript module) one call per batch; each reads the served model's settings as the server
reads them, under the architecture's model names (:class:`Served`).

:func:`step_model_throughput` measures the same search on any StepModel (the GPU
benchmark's torch engine: ``triton_kit.build_engines.families.nmt.torchscript.steps.step_model``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.nmt.architectures import ROOT, TRANSFORMER_NAMES
from triton_kit.benchmarks.nmt.measure import (
    BatchFn,
    Cell,
    count_tokens_for,
    held_out_pairs,
    measure_local,
    with_phases,
)
from triton_kit.build_engines.families.nmt.architecture import ModelNames
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.repository import parse


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
    """What the search needs from a repository's BLS model (``names.bls``: ``nmt``,
    ``nmt_rnn``), read as the server reads it, and the names of the models it calls."""

    settings: object
    limits: object
    text: object
    names: ModelNames = TRANSFORMER_NAMES

    @classmethod
    def load(cls, repository: Path, names: ModelNames = TRANSFORMER_NAMES) -> Served:
        from triton_kit.python_models.common.parameters import ModelParameters
        from triton_kit.python_models.nmt.settings import from_parameters
        from triton_kit.python_models.nmt.text import MarianText

        config = parse((repository / names.bls / "config.pbtxt").read_text())
        params = ModelParameters({k: v.string_value for k, v in config.parameters.items()})
        settings, limits = from_parameters(params)
        text = MarianText(repository / names.bls / "1", limits.max_source_length)
        return cls(settings, limits, text, names)


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
    process, one call per micro-batch, as ``nmt``'s BLS call makes it (the Transformer's only:
    no other architecture has the graph)."""
    from triton_kit.python_models.common.ort_session import SessionSettings, create_session
    from triton_kit.python_models.nmt.decode import Job
    from triton_kit.python_models.nmt.generate import GRAPH_OUTPUT, generate_graph

    path = repository / served.names.generate / "1" / "model.onnx"
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
    """The served search TorchScript (``--engine torch --search engine``: ``nmt_generate``,
    ``nmt_rnn_generate``) in process: loaded as Triton's pytorch backend loads it, on the device
    and JIT executor its config names (``threads`` intra-op threads on a CPU), one call per
    batch as the BLS model's call makes it."""
    import torch

    from triton_kit.build_engines.engines.torchscript.config import optimized_execution
    from triton_kit.build_engines.families.nmt.torchscript.generate import generate
    from triton_kit.python_models.common.sibling import sibling_device
    from triton_kit.python_models.nmt.decode import Job

    names = served.names
    device = sibling_device(repository / names.bls / "1", names.generate)
    module = torch.jit.load(str(repository / names.generate / "1" / "model.pt"), device)
    config = parse((repository / names.generate / "config.pbtxt").read_text())
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


def ort_step_model(repository: Path, threads: int, names: ModelNames = TRANSFORMER_NAMES):
    """The architecture's served encoder and decoder step files in ONNX Runtime sessions."""
    from triton_kit.python_models.nmt.ort import OrtStepModel

    return OrtStepModel(
        repository / names.encoder / "1" / "model.onnx",
        repository / names.decoder / "1" / "model.onnx",
        threads,
    )


def step_model_throughput(
    factory: Callable[[], object],
    repository: Path = ROOT / "model_repository",
    beam: int = 4,
    levels: Sequence[int] = (1, 8, 32),
    sentences: int = 192,
    checkpoint: Path = DEFAULT_CHECKPOINT,
    names: ModelNames = TRANSFORMER_NAMES,
) -> list[Cell]:
    """Sentences/s of the served search on ``factory()``'s StepModel at each concurrency.

    For the GPU benchmark: ``factory`` may return
    ``triton_kit.build_engines.families.nmt.torchscript.steps.step_model(checkpoint, "cuda")`` (or
    the ORT one); ``repository`` holds the BLS model (``names.bls``) whose decode settings and
    tokenizer to use
    (the default model's, or ``triton_kit.benchmarks.nmt.large.build_repository``'s). Cells carry
    the phase times (encoder, decoder per step, search per step) and exact match where the
    checkpoint has a held-out split.
    """
    served = Served.load(repository, names)
    run, timer = search_engine(factory(), served)
    return engine_throughput(run, repository, beam, levels, sentences, checkpoint, timer, names)


def engine_throughput(
    run: BatchFn,
    repository: Path,
    beam: int,
    levels: Sequence[int],
    sentences: int,
    checkpoint: Path,
    timer: PhaseTimer | None = None,
    names: ModelNames = TRANSFORMER_NAMES,
) -> list[Cell]:
    """Sentences/s of any batch engine behind the micro-batcher, at each concurrency."""
    pairs = held_out_pairs(with_references=(checkpoint / "split.json").exists())
    count = count_tokens_for(repository, names.bls)
    cells = []
    for level in levels:
        if timer is not None:
            timer.reset()
        cell = measure_local("in-process", run, beam, level, pairs[:sentences], count)
        cells.append(cell if timer is None else with_phases(cell, timer.phases()))
    return cells
