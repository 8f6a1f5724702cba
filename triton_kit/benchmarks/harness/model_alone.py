"""An ONNX model alone: in-process ONNX Runtime against the same file served by Triton's own
onnxruntime backend, at concurrency 1 and at saturation.

The in-process session is opened from the served ``config.pbtxt`` (threads, inter-op,
execution mode: python_models.common.ort_session, the project's one session helper), one
session per served instance. The served side is driven by perf_analyzer (C++, batch-1
requests), and Triton's own statistics API says where its time went: queue, compute and the
batches the dynamic batcher formed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.benchmarks.harness import perf_analyzer
from triton_kit.benchmarks.harness.measure import (
    Result,
    children_cpu_seconds,
    markdown_table,
    run_sync,
    run_threads,
)
from triton_kit.build_engines.repository import parse
from triton_kit.loadtest.triton_stats import StatsProbe, window
from triton_kit.python_models.common.ort_session import SessionSettings, create_session
from triton_kit.server.model_backends import backend_table

GOAL = 0.95  # issue 22: each model alone >= 0.95x in-process, at concurrency 1 and saturation

Feed = Callable[[int], Mapping[str, np.ndarray]]  # batch size -> the session's inputs


@dataclass(frozen=True)
class ServedOnnx:
    """What the served config says about an ONNX model: its file, session options, topology."""

    name: str
    onnx: Path
    settings: SessionSettings
    instances: int
    max_batch_size: int
    backend: str  # what serves it, for the report ("onnxruntime (Triton's own, r24.10)")

    @classmethod
    def read(cls, repository: Path, name: str) -> ServedOnnx:
        config = parse((repository / name / "config.pbtxt").read_text())
        parameters = {key: value.string_value for key, value in config.parameters.items()}
        return cls(
            name=name,
            onnx=repository / name / "1" / (config.default_model_filename or "model.onnx"),
            settings=SessionSettings.from_parameters(parameters),
            instances=sum(group.count for group in config.instance_group) or 1,
            max_batch_size=config.max_batch_size,
            backend=dict(backend_table(repository)).get(name, "?"),
        )

    def describe(self) -> str:
        s = self.settings
        mode = "parallel" if s.parallel else "sequential"
        return (
            f"{self.instances} instance(s) x {s.intra_op_threads} intra-op thread(s), "
            f"{s.inter_op_threads} inter-op, {mode} execution"
            + (f", session config {dict(s.config_entries)}" if s.config_entries else "")
        )

    def sessions(self) -> list[Any]:
        """One in-process session per served instance, with the served options."""
        return [create_session(self.onnx, self.settings) for _ in range(self.instances)]


def shares(in_flight: int, sessions: int) -> list[int]:
    """Items each session takes when ``in_flight`` items are spread over ``sessions`` as evenly
    as a server's instances would take them; sessions with none are left out."""
    split = [in_flight // sessions + (i < in_flight % sessions) for i in range(sessions)]
    return [n for n in split if n]


def timed_call(session: Any, inputs: Mapping[str, np.ndarray], batch: int) -> Callable[[], int]:
    def call() -> int:
        session.run(None, dict(inputs))
        return batch

    return call


def in_process(sessions: Sequence[Any], feed: Feed, in_flight: int, duration_s: float) -> Result:
    """``in_flight`` items at once: each session (instance) runs its share as one batch, in its
    own thread, closed loop. One item in flight is one session at batch 1."""
    batches = shares(in_flight, len(sessions))
    name = "in-process ORT, " + " + ".join(f"batch {b}" for b in batches)
    calls = [
        timed_call(session, feed(batch), batch)
        for session, batch in zip(sessions, batches, strict=False)
    ]
    if len(calls) == 1:
        return run_sync(name, calls[0], duration_s)
    return run_threads(name, calls, duration_s)


WINDOW_CALLS = 4  # a perf_analyzer window holds at least this many in-process call times
# perf_analyzer's windows must agree within this many %: on shared cores p99 jumps between
# windows, and a stricter bound fails whole cells; the in-process halves either side of each
# cell are what guard against drift.
STABILITY = 100


def window_s(local: Result, at_least_s: float) -> float:
    """perf_analyzer's window for the cell that ``local`` measured in process: long enough for
    a few of its calls, so windows of slow batches can agree with each other."""
    return max(at_least_s, WINDOW_CALLS * local.percentile_ms(50) / 1000)


@dataclass(frozen=True)
class Served:
    """One perf_analyzer cell, with Triton's statistics over it (per request, in ms)."""

    concurrency: int
    items_per_s: float
    p50_ms: float
    p99_ms: float
    queue_ms: float
    compute_ms: float  # compute input + infer + output: the request's batch's execution
    batch: float  # mean batch the dynamic batcher formed
    cpu_ms: float = float("nan")  # the server's CPU time per item (tritonserver's process tree)

    @classmethod
    def from_window(
        cls, concurrency: int, reported: dict, counters: Any, cpu_s: float = float("nan")
    ) -> Served:
        requests = max(counters.success_count, 1)
        compute = counters.compute_input_ns + counters.compute_infer_ns
        compute += counters.compute_output_ns
        return cls(
            concurrency=concurrency,
            items_per_s=reported["items_per_s"],
            p50_ms=reported["p50"],
            p99_ms=reported["p99"],
            queue_ms=counters.queue_ns / requests / 1e6,
            compute_ms=compute / requests / 1e6,
            batch=counters.success_count / max(counters.execution_count, 1),
            cpu_ms=1000 * cpu_s / requests,
        )


def served(
    url: str, model: str, concurrency: int, seconds: float, out: Path, input_data: str = "random"
) -> Served | str:
    """perf_analyzer at ``concurrency`` (batch-1 requests), bracketed by two statistics
    snapshots; the reason as a string when it could not run."""
    url = url.removeprefix("grpc://")
    probe = StatsProbe(f"grpc://{url}")
    try:
        before, cpu = probe.snapshot(), children_cpu_seconds()
        reported = perf_analyzer.run(
            url, model, concurrency, seconds, out, input_data, stability=STABILITY
        )
        after, cpu = probe.snapshot(), children_cpu_seconds() - cpu
    finally:
        probe.close()
    if "p50" not in reported:
        return str(reported.get("skipped") or reported.get("error"))
    return Served.from_window(concurrency, reported, window(before, after)[model], cpu)


@dataclass(frozen=True)
class Comparison:
    """One input at one load point: in-process against served."""

    input: str  # "224x224 image", "16 tokens"
    point: str  # "concurrency 1", "saturation"
    local: Result
    served: Served
    local_cpu_ms: float = float("nan")  # this process's CPU time per item, warm-up left out

    @property
    def ratio(self) -> float:
        return self.served.items_per_s / self.local.throughput

    @property
    def cpu_ratio(self) -> float:
        """In-process / served CPU per item: hardly moved by other jobs' load, unlike rates."""
        return self.local_cpu_ms / self.served.cpu_ms

    @property
    def met(self) -> bool:
        return self.ratio >= GOAL


HEADERS = [
    "input", "load", "in-process", "in-process items/s", "p50 ms",
    "served items/s (perf_analyzer)", "p50 ms", "p99 ms", f"served / in-process (goal {GOAL}x)",
    "Triton queue ms/req", "Triton compute ms/req", "mean served batch",
    "CPU ms/item in-process / served", "by CPU cost",
]  # fmt: skip


def compare(
    input: str,
    point: str,
    local: Callable[[float], Result],
    serve: Callable[[float], Served | str],
    seconds: float,
) -> Comparison | str:
    """In-process for half of ``seconds``, the served cell (``serve(window)``), in-process for
    the other half: drift in other jobs' load hits both sides alike. The reason as a string
    when the served cell could not run."""
    first = local(seconds / 2)
    cell = serve(window_s(first, seconds / 2))
    if isinstance(cell, str):
        return cell
    both = first.plus(local(seconds / 2))
    return Comparison(input, point, both, cell, 1000 * both.cpu_s / max(both.items, 1))


def comparison_table(rows: Sequence[Comparison]) -> str:
    return markdown_table(
        HEADERS,
        [
            [
                r.input,
                f"{r.point} (c{r.served.concurrency})",
                r.local.name.split("in-process ORT, ")[-1],
                round(r.local.throughput, 1),
                round(r.local.percentile_ms(50), 2),
                round(r.served.items_per_s, 1),
                round(r.served.p50_ms, 2),
                round(r.served.p99_ms, 2),
                f"{r.ratio:.2f}x {'met' if r.met else 'NOT met'}",
                round(r.served.queue_ms, 2),
                round(r.served.compute_ms, 2),
                round(r.served.batch, 1),
                f"{r.local_cpu_ms:.1f} / {r.served.cpu_ms:.1f}",
                f"{r.cpu_ratio:.2f}x",
            ]
            for r in rows
        ],
    )


def verdicts(rows: Sequence[Comparison]) -> list[str]:
    """One line per load point: how many inputs meet the goal, and the range of ratios."""
    lines = []
    for point in dict.fromkeys(r.point for r in rows):
        ratios = [r.ratio for r in rows if r.point == point]
        met = sum(ratio >= GOAL for ratio in ratios)
        span = f"{min(ratios):.2f}x" + (f"-{max(ratios):.2f}x" if len(ratios) > 1 else "")
        verdict = "met" if met == len(ratios) else "NOT met"
        counted = f" ({met} of {len(ratios)} inputs)" if len(ratios) > 1 else ""
        lines.append(f"- {point}: served / in-process {span}: goal {GOAL}x {verdict}{counted}.")
    return lines
