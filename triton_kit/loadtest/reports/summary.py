"""Per model and step: exact percentiles, throughput, errors, and Triton's queue vs compute.

Pure functions over a recorder file, so they are tested without Locust. Only samples that
completed inside a step's measured window (after settling) count, and the server-side
numbers are the counter deltas over exactly that window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.loadtest import recorder
from triton_kit.loadtest.reports.stability import StabilityRule, is_stable
from triton_kit.loadtest.triton_stats import ModelCounters, window

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class ServerTime:
    """Mean server-side milliseconds per request of one Triton model in a window."""

    model: str
    requests: int
    queue_ms: float
    compute_ms: float

    @classmethod
    def of(cls, model: str, delta: ModelCounters) -> ServerTime:
        count = max(delta.success_count, 1)
        compute = delta.compute_input_ns + delta.compute_infer_ns + delta.compute_output_ns
        return cls(model, delta.success_count, delta.queue_ns / count / 1e6, compute / count / 1e6)


@dataclass(frozen=True)
class StepResult:
    protocol: str
    model: str
    users: int
    window_s: float
    requests: int
    failures: int
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    throughput_rps: float
    server: tuple[ServerTime, ...]
    client_cpu_s: float = float("nan")  # Locust's and its gRPC sidecars' CPU time in the window

    platform: str = ""  # of the called model: "ensemble" changes how its stats read
    stable: bool | None = None  # None: no stability rule was set for the run

    @property
    def server_split_ms(self) -> tuple[float, float]:
        """(queue, compute) per request of the called model, its parts included.

        An ensemble reports no queue and, as compute, the sum of its steps' compute: both
        come from its steps. A BLS model's compute includes the time its calls wait in its
        parts' queues: that time moves to queue.
        """
        top = next((s for s in self.server if s.model == self.model), None)
        if top is None or not top.requests:
            return float("nan"), float("nan")
        parts = [s for s in self.server if s is not top]
        queue = sum(s.queue_ms * s.requests for s in parts) / top.requests
        if self.platform == "ensemble":
            return queue, sum(s.compute_ms * s.requests for s in parts) / top.requests
        return top.queue_ms + queue, top.compute_ms - queue

    @property
    def client_cpu_ratio(self) -> float:
        """Share of one core the load generator used: near 1.0 it, not Triton, is the limit."""
        return self.client_cpu_s / self.window_s if self.window_s else float("nan")

    @property
    def error_ratio(self) -> float:
        return self.failures / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["error_ratio"] = self.error_ratio
        row["client_cpu_ratio"] = self.client_cpu_ratio
        return row


def _percentiles(samples: np.ndarray) -> list[float]:
    if samples.size == 0:
        return [float("nan")] * len(PERCENTILES)
    return [float(v) for v in np.percentile(samples, PERCENTILES)]


def _belongs(server_model: str, model: str) -> bool:
    """The ensemble or BLS model itself and its composing ``<model>_*`` models."""
    return server_model == model or server_model.startswith(model + "_")


def _server_times(step: dict[str, Any], model: str) -> tuple[ServerTime, ...]:
    if not step.get("stats_start") or not step.get("stats_end"):
        return ()
    deltas = window(recorder.counters(step["stats_start"]), recorder.counters(step["stats_end"]))
    return tuple(
        ServerTime.of(name, delta)
        for name, delta in sorted(deltas.items())
        if _belongs(name, model)
    )


def _stability(meta: dict[str, Any]) -> StabilityRule | None:
    fields = meta.get("stability") or {}
    rule = StabilityRule(**fields) if fields else None
    return rule if rule is not None and rule.enabled else None


def step_results(
    meta: dict[str, Any],
    arrays: dict[str, np.ndarray],
    protocol: str,
    cpu_traces: list[recorder.CpuTrace] | None = None,
) -> list[StepResult]:
    """One StepResult per (step, model) that has a measured window."""
    results = []
    rule = _stability(meta)
    for step in meta["steps"]:
        begin, end = step.get("measure_start"), step.get("end")
        if begin is None or end is None or end <= begin:
            continue
        in_window = (arrays["t"] >= begin) & (arrays["t"] < end)
        stable = None
        if rule is not None:
            stable = is_stable(rule, arrays["t"], arrays["ms"], arrays["ok"], arrays["model"],
                               len(meta["models"]), begin, end)  # fmt: skip
        for index, model in enumerate(meta["models"]):
            chosen = in_window & (arrays["model"] == index)
            ok = chosen & arrays["ok"]
            requests = int(chosen.sum())
            results.append(
                StepResult(
                    protocol,
                    model,
                    int(step["users"]),
                    end - begin,
                    requests,
                    requests - int(ok.sum()),
                    *_percentiles(arrays["ms"][ok]),
                    throughput_rps=float(ok.sum()) / (end - begin),
                    server=_server_times(step, model),
                    client_cpu_s=recorder.cpu_seconds(cpu_traces or [], begin, end),
                    platform=meta.get("platforms", {}).get(model, ""),
                    stable=stable,
                )
            )
    return results


def load_results(path: Path, protocol: str) -> list[StepResult]:
    meta, arrays, traces = recorder.load(path)
    return step_results(meta, arrays, protocol, traces)


def resolution_ms(samples: np.ndarray) -> float:
    """Smallest non-zero gap between distinct recorded times: the timer's effective resolution."""
    distinct = np.unique(samples)
    gaps = np.diff(distinct)
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if gaps.size else float("inf")
