"""Every request's exact timing, and Triton's counters at each step's window edges.

Locust's histogram is approximate; this keeps the raw samples (a few bytes each) so the
summary computes exact percentiles per model and step. The stepped shape tells the
recorder where each step starts, where its measured window opens (after settling) and
where it ends; Triton's statistics are read at the same instants, so client and server
numbers describe the same window. Written as one .npz at quit.

With ``--processes N`` the shape and the Triton snapshots live in the master and the
samples in the workers: each worker writes ``<name>.worker-<pid>.npz`` beside the master's
file, and :func:`load` merges them. Every process also samples its own CPU time twice a
second, so the summary can say how busy the load generator was in each window.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.loadtest.triton_stats import ModelCounters, StatsProbe

logger = logging.getLogger(__name__)
_current: Recorder | None = None


@dataclass
class Step:
    index: int
    users: int  # users per unit of user weight
    start: float
    measure_start: float | None = None
    end: float | None = None
    stats_start: dict[str, dict] = field(default_factory=dict)
    stats_end: dict[str, dict] = field(default_factory=dict)


class Recorder:
    """Collects samples from ``events.request``; the shape drives the step marks."""

    CPU_SAMPLE_S = 0.5

    def __init__(self, host: str, path: Path) -> None:
        self.host = host
        self.path = path
        self.is_worker = False
        self.cpu_t = array("d")
        self.cpu_s = array("d")
        self.models: list[str] = []
        self.t = array("d")
        self.ms = array("d")
        self.model = array("H")
        self.ok = array("b")
        self.steps: list[Step] = []
        self.platforms: dict[str, str] = {}
        # A worker started without --host gets it from the master later; it never reads stats.
        self.probe = StatsProbe(host) if host else None
        self.ended = False
        self.stability: dict[str, Any] = {}  # the rule's fields, for the summary

    def is_stable(self, rule: Any, begin: float, end: float) -> bool:
        """perf_analyzer's rule over the samples this process holds (none in a master)."""
        from triton_kit.loadtest.reports.stability import is_stable

        t = np.frombuffer(self.t, dtype=np.float64).copy()  # copies: the arrays keep growing
        chosen = t >= begin
        return is_stable(
            rule,
            t[chosen],
            np.frombuffer(self.ms, dtype=np.float64).copy()[chosen],
            np.frombuffer(self.ok, dtype=np.int8).astype(bool)[chosen],
            np.frombuffer(self.model, dtype=np.uint16).copy()[chosen],
            len(self.models),
            begin,
            end,
        )

    def on_request(
        self, response_time: float, exception: Any = None, context: Any = None, **_: Any
    ) -> None:
        model = (context or {}).get("model") if isinstance(context, dict) else None
        if model is None:
            return
        if model not in self.models:
            self.models.append(model)
        self.t.append(time.time())
        self.ms.append(response_time)
        self.model.append(self.models.index(model))
        self.ok.append(exception is None)

    def sample_cpu(self) -> None:
        """This process's CPU time, its gRPC sidecars' included (they work for it)."""
        sidecars = sys.modules.get("triton_kit.loadtest.sidecar.client")  # loaded only where used
        extra = sidecars.cpu_seconds() if sidecars is not None else 0.0
        self.cpu_t.append(time.time())
        self.cpu_s.append(time.process_time() + extra)

    def trace_cpu(self) -> None:
        """Runs in a greenlet for the life of the process."""
        import gevent

        while True:
            self.sample_cpu()
            gevent.sleep(self.CPU_SAMPLE_S)

    def _snapshot(self) -> dict[str, dict]:
        if self.probe is None:
            return {}
        try:
            stats = self.probe.snapshot()
            unknown = [name for name in stats if name not in self.platforms]
            if unknown:
                self.platforms.update(self.probe.platforms(unknown))
            return {name: asdict(c) for name, c in stats.items()}
        except Exception as exc:  # the client numbers stay useful without the server's
            logger.warning("Triton statistics unavailable: %s", exc)
            return {}

    def begin_step(self, index: int, users: int) -> None:
        now = time.time()
        if self.steps:
            self._close(self.steps[-1], now)
        self.steps.append(Step(index, users, now))

    def begin_measure(self) -> None:
        step = self.steps[-1] if self.steps else None
        if step is not None and step.measure_start is None:
            step.stats_start = self._snapshot()
            step.measure_start = time.time()

    def _close(self, step: Step, now: float) -> None:
        if step.end is None:
            step.end = now
            if step.measure_start is not None:
                step.stats_end = self._snapshot()

    def end(self) -> None:
        """At the last tick: close the last step before users are stopped."""
        if self.steps and not self.ended:
            self._close(self.steps[-1], time.time())
        self.ended = True

    def dump(self) -> None:
        self.sample_cpu()
        if self.is_worker:
            target = self.path.with_name(f"{self.path.stem}.worker-{os.getpid()}.npz")
        else:
            self.end()
            target = self.path
        if self.probe is not None:
            self.probe.close()
        meta = {
            "host": self.host,
            "models": self.models,
            "platforms": self.platforms,
            "steps": [asdict(s) for s in self.steps],
            "stability": self.stability,
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            target,
            t=np.frombuffer(self.t, dtype=np.float64),
            ms=np.frombuffer(self.ms, dtype=np.float64),
            model=np.frombuffer(self.model, dtype=np.uint16),
            ok=np.frombuffer(self.ok, dtype=np.int8).astype(bool),
            cpu_t=np.frombuffer(self.cpu_t, dtype=np.float64),
            cpu_s=np.frombuffer(self.cpu_s, dtype=np.float64),
            meta=np.array(json.dumps(meta)),
        )


def current() -> Recorder | None:
    return _current


def install(environment: Any, path: str) -> Recorder:
    """Attach a recorder to this Locust process; it writes its file when Locust quits."""
    global _current
    import gevent

    from triton_kit.loadtest.options import stability_rule

    recorder = Recorder(environment.host or "", Path(path))
    recorder.stability = asdict(stability_rule(environment.parsed_options))
    environment.events.request.add_listener(recorder.on_request)

    def on_quitting(environment: Any, **_: Any) -> None:
        recorder.is_worker = type(environment.runner).__name__ == "WorkerRunner"
        recorder.dump()

    environment.events.quitting.add_listener(on_quitting)
    gevent.spawn(recorder.trace_cpu)
    _current = recorder
    return recorder


CpuTrace = tuple[np.ndarray, np.ndarray]  # (wall-clock times, process CPU seconds)


def _read(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files if key != "meta"}
        meta = json.loads(str(data["meta"]))
    return meta, arrays


def load(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], list[CpuTrace]]:
    """(meta with steps, merged samples, one CPU trace per Locust process) of a run."""
    meta, arrays = _read(path)
    models: list[str] = list(meta["models"])
    parts = [(meta["models"], arrays)]
    for worker in sorted(path.parent.glob(f"{path.stem}.worker-*.npz")):
        worker_meta, worker_arrays = _read(worker)
        parts.append((worker_meta["models"], worker_arrays))
        models += [m for m in worker_meta["models"] if m not in models]
    merged = {
        "t": np.concatenate([a["t"] for _, a in parts]),
        "ms": np.concatenate([a["ms"] for _, a in parts]),
        "ok": np.concatenate([a["ok"] for _, a in parts]).astype(bool),
        # each file numbers its models in its own order: map to the merged list
        "model": np.concatenate(
            [np.array([models.index(n) for n in names], dtype=np.uint16)[a["model"]]
             if len(a["model"]) else a["model"].astype(np.uint16) for names, a in parts]
        ),
    }  # fmt: skip
    traces = [(a["cpu_t"], a["cpu_s"]) for _, a in parts if "cpu_t" in a and len(a["cpu_t"])]
    return {**meta, "models": models}, merged, traces


def cpu_seconds(traces: list[CpuTrace], begin: float, end: float) -> float:
    """CPU time all Locust processes spent between two wall-clock instants (interpolated)."""
    total = 0.0
    for times, cpu in traces:
        if len(times) >= 2:
            total += float(np.interp(end, times, cpu) - np.interp(begin, times, cpu))
    return total if traces else float("nan")


def counters(raw: dict[str, dict]) -> dict[str, ModelCounters]:
    return {name: ModelCounters(**values) for name, values in raw.items()}
