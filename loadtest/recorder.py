"""Every request's exact timing, and Triton's counters at each step's window edges.

Locust's histogram is approximate; this keeps the raw samples (a few bytes each) so the
summary computes exact percentiles per model and step. The stepped shape tells the
recorder where each step starts, where its measured window opens (after settling) and
where it ends; Triton's statistics are read at the same instants, so client and server
numbers describe the same window. Written as one .npz at quit.
"""

from __future__ import annotations

import json
import logging
import time
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.triton_stats import ModelCounters, StatsProbe

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
    # CPU seconds of this Locust process at the window's edges: is the generator saturated?
    cpu_start: float | None = None
    cpu_end: float | None = None


class Recorder:
    """Collects samples from ``events.request``; the shape drives the step marks."""

    def __init__(self, host: str, path: Path) -> None:
        self.host = host
        self.path = path
        self.models: list[str] = []
        self.t = array("d")
        self.ms = array("d")
        self.model = array("H")
        self.ok = array("b")
        self.steps: list[Step] = []
        self.probe = StatsProbe(host)
        self.ended = False

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

    def _snapshot(self) -> dict[str, dict]:
        try:
            return {name: asdict(c) for name, c in self.probe.snapshot().items()}
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
            step.cpu_start = time.process_time()

    def _close(self, step: Step, now: float) -> None:
        if step.end is None:
            step.end = now
            step.cpu_end = time.process_time()
            if step.measure_start is not None:
                step.stats_end = self._snapshot()

    def end(self) -> None:
        """At the last tick: close the last step before users are stopped."""
        if self.steps and not self.ended:
            self._close(self.steps[-1], time.time())
        self.ended = True

    def dump(self) -> None:
        self.end()
        self.probe.close()
        meta = {"host": self.host, "models": self.models, "steps": [asdict(s) for s in self.steps]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            self.path,
            t=np.frombuffer(self.t, dtype=np.float64),
            ms=np.frombuffer(self.ms, dtype=np.float64),
            model=np.frombuffer(self.model, dtype=np.uint16),
            ok=np.frombuffer(self.ok, dtype=np.int8).astype(bool),
            meta=np.array(json.dumps(meta)),
        )


def current() -> Recorder | None:
    return _current


def install(environment: Any, path: str) -> Recorder:
    """Attach a recorder to this Locust process; it writes ``path`` when Locust quits."""
    global _current
    recorder = Recorder(environment.host or "", Path(path))
    environment.events.request.add_listener(recorder.on_request)
    environment.events.quitting.add_listener(lambda **_: recorder.dump())
    _current = recorder
    return recorder


def load(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) from a recorder file."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in ("t", "ms", "model", "ok")}
        meta = json.loads(str(data["meta"]))
    return meta, arrays


def counters(raw: dict[str, dict]) -> dict[str, ModelCounters]:
    return {name: ModelCounters(**values) for name, values in raw.items()}
