"""The NMT benchmark's matrix: the suites of a run (an architecture at one size, its served
repository, its sentences and the builds measured beside its default one) and the runner that
measures every engine of a suite at every beam size and concurrency, repeats rotated."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.nmt.architectures import BENCHMARKED, VARIANTS, Benchmarked
from triton_kit.benchmarks.nmt.ct2 import ctranslate2_engine
from triton_kit.benchmarks.nmt.in_process import (
    CallTimer,
    PhaseTimer,
    Served,
    graph_engine,
    ort_step_model,
    search_engine,
    torch_generate_engine,
)
from triton_kit.benchmarks.nmt.measure import (
    PLACEHOLDER,
    BatchFn,
    Cell,
    count_tokens_for,
    held_out_pairs,
    measure_local,
    median_cell,
    with_phases,
)
from triton_kit.benchmarks.nmt.report import (
    CT2_FP32,
    CT2_INT8,
    IN_PROCESS,
    TRITON,
    TRITON_CT2,
    TRITON_CT2_DIRECT,
    TRITON_CT2_TEXT,
    TRITON_CT2_TEXT_RAW,
)
from triton_kit.benchmarks.nmt.served import (
    copy_models,
    measure_ct2_direct,
    measure_raw_text,
    measure_triton,
)
from triton_kit.build_engines.families.nmt.architecture import ModelNames


@dataclass(frozen=True)
class Suite:
    """One architecture at one model size: its served repository, checkpoint, sentences and
    matrix, and the other builds measured (``variants``: :data:`VARIANTS` key → repository)."""

    name: str  # the size
    architecture: str
    names: ModelNames
    repository: Path
    checkpoint: Path
    pairs: list[tuple[str, str | None]]
    beams: list[int]
    levels: list[int]
    repeats: int
    sentences: Callable[[int], int]  # per cell, from the concurrency
    base: tuple[str, ...]  # the engines of the default build
    variants: dict[str, Path] = field(default_factory=dict)

    @property
    def engines(self) -> tuple[str, ...]:
        built = (VARIANTS[key] for key in VARIANTS if key in self.variants)
        names = [name for v in built for name in (v.local, v.served) if name is not None]
        if TRITON_CT2 in names:  # the same server, clients calling nmt_ct2 itself
            names.append(TRITON_CT2_DIRECT)
        if TRITON_CT2_TEXT in names:  # the same server, bare tritonclient clients
            names.append(TRITON_CT2_TEXT_RAW)
        return self.base + tuple(names)


def variant_repository(
    checkpoint: Path, workdir: Path, size: str, threads: int, variant: str, architecture: str
) -> Path:
    """Another build of the checkpoint (:data:`VARIANTS`' ``variant``: its precision and build
    flags) through :func:`triton_kit.benchmarks.nmt.large.build_repository`, served with the
    same thread budget as the others."""
    from triton_kit.benchmarks.nmt import large as nmt_large

    spec = VARIANTS[variant]
    names = BENCHMARKED[architecture].architecture().names
    label = f"{architecture}-{size}"
    built = nmt_large.build_repository(
        checkpoint,
        workdir / f"{label}-built-{variant}",
        workdir / f"{label}-work-{variant}",
        threads,
        precision=spec.precision,
        engine_args=("--architecture", architecture, *spec.build_args),
    )
    repository = workdir / f"repository-{label}-{variant}"
    copy_models(built, repository, threads, names)
    return repository


def python_search_repository(
    checkpoint: Path, workdir: Path, threads: int, architecture: str
) -> Path:
    """The tiny size's ``Triton`` baseline: the Python search over the step models
    (``--engine onnxruntime --search python``), built for the run."""
    from triton_kit.benchmarks.nmt import large as nmt_large

    return nmt_large.build_repository(
        checkpoint,
        workdir / f"{architecture}-tiny-built-python",
        workdir / f"{architecture}-tiny-work-python",
        threads,
        engine_args=("--architecture", architecture),
    )


def suites(args: argparse.Namespace, workdir: Path) -> list[Suite]:
    """The run's suites: each architecture it measures (those ``beside`` the benchmarked one,
    then it) at each size, on the benchmarked architecture's engines."""
    bench = BENCHMARKED[args.architecture]
    beams = [int(b) for b in args.beams.split(",")]
    found = []
    for name in (*bench.beside, bench.name):
        measured = BENCHMARKED[name]
        names = measured.architecture().names
        default = args.checkpoint if name == bench.name else None
        default = default or measured.architecture().default_checkpoint
        for size in args.sizes.split(","):
            if size not in measured.sizes:
                raise SystemExit(
                    f"--sizes: {size!r} is not a size of {name} ({', '.join(measured.sizes)})"
                )
            keys = _variants(args, bench, measured, size)  # refused before any work
            repository = workdir / f"repository-{name}-{size}"
            if size == "tiny":
                source = args.model_repository or python_search_repository(
                    default, workdir, args.threads, name
                )
                copy_models(source, repository, args.threads, names)
                checkpoint = default
                levels = [int(c) for c in args.concurrency.split(",")]
                pairs = held_out_pairs()
                repeats = args.repeats

                def count(level: int) -> int:
                    return max(args.min_sentences, level * args.sentences_per_client)

            else:  # large: a random Marian of opus-mt-en-de's shape, speed only
                from triton_kit.benchmarks.nmt import large as nmt_large

                vocab = args.large_vocab or nmt_large.OPUS_MT_EN_DE_VOCAB
                checkpoint = nmt_large.write_checkpoint(workdir / "large-checkpoint", vocab)
                built = nmt_large.build_repository(
                    checkpoint, workdir / "large-built", workdir / "large-work", args.threads
                )
                copy_models(built, repository, args.threads, names)
                levels = [int(c) for c in args.large_concurrency.split(",")]
                pairs = held_out_pairs(with_references=False)
                repeats = args.large_repeats

                def count(level: int) -> int:
                    return args.large_sentences

            variants = {
                key: variant_repository(checkpoint, workdir, size, args.threads, key, name)
                for key in keys
            }
            found.append(
                Suite(
                    size,
                    name,
                    names,
                    repository,
                    checkpoint,
                    pairs,
                    beams,
                    levels,
                    repeats,
                    count,
                    bench.engines,
                    variants,
                )
            )
    return found


def _variants(
    args: argparse.Namespace, bench: Benchmarked, measured: Benchmarked, size: str
) -> list[str]:
    """The other builds the flags ask for at ``size``; refuses one the architectures lack."""
    asked = [key for key, v in VARIANTS.items() if size in getattr(args, v.flag).split(",")]
    for key in asked:
        for arch in (bench, measured):
            if key not in arch.variants:
                flag = "--" + VARIANTS[key].flag.replace("_", "-")
                raise SystemExit(f"{flag}: {arch.name} has no {key} build")
    return asked


def local_engines(
    suite: Suite, workdir: Path, threads: int
) -> tuple[dict[str, BatchFn], dict[str, PhaseTimer | CallTimer]]:
    """The suite's in-process engines, each with the timer of its phases."""
    served = Served.load(suite.repository, suite.names)
    max_length = served.limits.default_max_length
    engines: dict[str, BatchFn] = {}
    timers: dict[str, PhaseTimer | CallTimer] = {}
    if IN_PROCESS in suite.base:
        step_model = ort_step_model(suite.repository, threads, suite.names)
        engines[IN_PROCESS], timers[IN_PROCESS] = search_engine(step_model, served)
    for name, quantization in ((CT2_FP32, "float32"), (CT2_INT8, "int8")):
        if name in suite.base:
            engines[name] = ctranslate2_engine(
                suite.checkpoint, quantization, workdir, threads, max_length
            )
    for key, repository in suite.variants.items():
        variant = VARIANTS[key]
        if variant.local is None:  # served only (its in-process twin is a base engine)
            continue
        built = Served.load(repository, suite.names)
        if variant.search == "python":
            step_model = ort_step_model(repository, threads, suite.names)
            engines[variant.local], timers[variant.local] = search_engine(step_model, built)
            continue
        call_timer = CallTimer()
        load = graph_engine if variant.search == "graph" else torch_generate_engine
        engines[variant.local] = call_timer.timed(load(repository, built, threads))
        timers[variant.local] = call_timer
    return engines, timers


def served_repositories(suite: Suite) -> dict[str, Path]:
    """The suite's served engines, each the repository its own server serves."""
    repositories = {TRITON: suite.repository} if TRITON in suite.base else {}
    for key, repository in suite.variants.items():
        repositories[VARIANTS[key].served] = repository
    return repositories


def run_suite(suite: Suite, workdir: Path, threads: int) -> list[Cell]:
    from triton_kit.server import ServerConfig, TritonServer

    engines, timers = local_engines(suite, workdir, threads)
    repositories = served_repositories(suite)
    count_tokens = count_tokens_for(suite.repository, suite.names.bls)
    runs: dict[tuple[str, int, int], list[Cell]] = {}
    shared = {TRITON_CT2_DIRECT: TRITON_CT2, TRITON_CT2_TEXT_RAW: TRITON_CT2_TEXT}
    served = {*repositories, *(name for name, of in shared.items() if of in repositories)}
    engine_names = tuple(name for name in suite.engines if name in engines or name in served)
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                TritonServer(
                    ServerConfig(model_repository=path, http_port=0, grpc_port=0, metrics_port=0)
                )
            )
            for name, path in repositories.items()
        }
        for name, of in shared.items():  # other clients of the same server
            if of in servers:
                servers[name] = servers[of]
        for repeat in range(suite.repeats):
            shift = repeat % len(engine_names)
            order = engine_names[shift:] + engine_names[:shift]
            for beam, level in itertools.product(suite.beams, suite.levels):
                pairs = suite.pairs[: suite.sentences(level)]
                for name in order:
                    if name == TRITON_CT2_DIRECT:
                        cell = measure_ct2_direct(
                            servers[name], beam, level, pairs, count_tokens, name
                        )
                    elif name == TRITON_CT2_TEXT_RAW:
                        cell = measure_raw_text(
                            servers[name], beam, level, pairs, count_tokens, name
                        )
                    elif name in servers:
                        cell = measure_triton(
                            servers[name], beam, level, pairs, count_tokens, name, suite.names
                        )
                    else:
                        for each in timers.values():
                            each.reset()
                        cell = measure_local(name, engines[name], beam, level, pairs, count_tokens)
                        if name in timers:
                            cell = with_phases(cell, timers[name].phases())
                    runs.setdefault((name, beam, level), []).append(_report(suite, cell))
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

    files = {"fp32": suite.repository, "int8": suite.variants.get("int8")}
    decoder = suite.names.decoder
    return [
        profile_decoder(repo / decoder / "1" / "model.onnx", f"{suite.name} {p}", rows, threads)
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


def _report(suite: Suite, cell: Cell) -> Cell:
    phases = " ".join(f"{k}={v:.3g}" for k, v in cell.phases.items())
    exact = "" if cell.exact is None else f"exact {cell.exact:.3f} "
    print(
        f"{suite.names.bls:7s} {suite.name:5s} {cell.engine:18s} beam {cell.beam} "
        f"c={cell.concurrency:<3d} {cell.sentences_per_s:7.1f} sent/s p50 {cell.ms(50):7.1f} ms "
        f"{exact} {phases}",
        flush=True,
    )
    return cell
