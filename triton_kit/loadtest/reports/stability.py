"""perf_analyzer's stability rule for one step: consecutive windows that agree.

A step's measured time (after settling) is cut into windows of ``window_s`` seconds. The
step is stable once, for every model, the last ``windows`` complete windows each hold at
least ``min_samples`` successful requests, and each window's throughput and p99 lie within
``tolerance`` (a fraction) of their mean over those windows. The stepped shape checks this
once a second and moves on as soon as a step is stable (``--step-time`` is then the most a
step may take); the summary applies the same rule to the recorded samples and says, per
step, whether it held.

Pure functions over numpy arrays, so the shape (online) and the summary (afterwards) agree.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

DEFAULT_WINDOW_S = 0.0  # 0: off, every step runs for --step-time
DEFAULT_TOLERANCE = 0.10  # perf_analyzer's --stability-percentage 10
DEFAULT_WINDOWS = 3  # perf_analyzer judges the last 3 measurements
DEFAULT_MIN_SAMPLES = 50


@dataclass(frozen=True)
class StabilityRule:
    window_s: float = DEFAULT_WINDOW_S
    tolerance: float = DEFAULT_TOLERANCE
    windows: int = DEFAULT_WINDOWS
    min_samples: int = DEFAULT_MIN_SAMPLES

    @property
    def enabled(self) -> bool:
        return self.window_s > 0

    def describe(self) -> str:
        return (
            f"throughput and p99 within ±{100 * self.tolerance:g} % of their mean over "
            f"{self.windows} consecutive {self.window_s:g} s windows, each with at least "
            f"{self.min_samples} successful requests per model"
        )


def _window_stats(
    t: np.ndarray, ms: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, throughput, p99) per window delimited by ``edges``."""
    counts, rates, p99s = [], [], []
    for lo, hi in itertools.pairwise(edges):
        chosen = ms[(t >= lo) & (t < hi)]
        counts.append(chosen.size)
        rates.append(chosen.size / (hi - lo))
        p99s.append(float(np.percentile(chosen, 99)) if chosen.size else np.nan)
    return np.array(counts), np.array(rates), np.array(p99s)


def _within(values: np.ndarray, tolerance: float) -> bool:
    mean = float(np.mean(values))
    return bool(np.all(np.isfinite(values))) and bool(
        np.all(np.abs(values - mean) <= tolerance * abs(mean))
    )


def is_stable(
    rule: StabilityRule,
    t: np.ndarray,
    ms: np.ndarray,
    ok: np.ndarray,
    model: np.ndarray,
    models: int,
    begin: float,
    end: float,
) -> bool:
    """Whether the last ``rule.windows`` complete windows in [begin, end) agree, per model.

    Windows start at ``begin`` (the end of settling). Failed requests do not count as
    samples (their latency is not the service's), but a model with no success fails.
    """
    if not rule.enabled or models == 0:
        return False
    complete = int((end - begin) // rule.window_s)
    if complete < rule.windows:
        return False
    first = complete - rule.windows
    edges = begin + rule.window_s * np.arange(first, complete + 1)
    for index in range(models):
        chosen = ok & (model == index)
        counts, rates, p99s = _window_stats(t[chosen], ms[chosen], edges)
        if counts.min() < rule.min_samples:
            return False
        if not (_within(rates, rule.tolerance) and _within(p99s, rule.tolerance)):
            return False
    return True
