"""Service-level objectives: a breach is a sentence naming protocol, model, step and value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from triton_kit.loadtest.reports.summary import StepResult

# Below this many samples a p99 is little more than the maximum: flagged, not stated as fact.
MIN_P99_SAMPLES = 100


@dataclass(frozen=True)
class Slo:
    p99_ms: float | None = None
    error_ratio: float | None = None

    def breaches(self, results: Sequence[StepResult]) -> list[str]:
        found = []
        for r in results:
            where = f"{r.protocol} {r.model} at {r.users} users"
            if r.requests == 0:
                found.append(f"{where}: no request completed in the measured window")
                continue
            if self.p99_ms is not None and not (r.p99_ms <= self.p99_ms):
                value = "n/a (every request failed)" if math.isnan(r.p99_ms) else f"{r.p99_ms:.2f}"
                found.append(f"{where}: p99 {value} ms > {self.p99_ms:g} ms")
            if self.error_ratio is not None and r.error_ratio > self.error_ratio:
                found.append(
                    f"{where}: error ratio {r.error_ratio:.4f} > {self.error_ratio:g} "
                    f"({r.failures} of {r.requests} failed)"
                )
        return found


@dataclass(frozen=True)
class Capacity:
    """model_analyzer's question: the highest load of one protocol and model within the SLO."""

    protocol: str
    model: str
    p99_slo_ms: float
    best: StepResult | None  # the step with the highest throughput that met the SLO
    highest_tested: int  # users of the highest step run: a best at this step is a lower bound

    def sentence(self) -> str:
        where = f"{self.protocol} {self.model}"
        if self.best is None:
            return f"{where}: no step met p99 <= {self.p99_slo_ms:g} ms"
        b = self.best
        bound = (
            " (the highest step tested: the limit may lie above)"
            if (b.users == self.highest_tested)
            else ""
        )
        return (
            f"{where}: {b.throughput_rps:.1f} req/s at {b.users} users with p99 "
            f"{b.p99_ms:.2f} ms <= {self.p99_slo_ms:g} ms{bound}"
        )


def capacities(results: Sequence[StepResult], slo: Slo) -> list[Capacity]:
    """Per protocol and model, the step of highest throughput that meets the p99 SLO.

    A step counts only if its p99 rests on enough samples (MIN_P99_SAMPLES) and, when an
    error-ratio SLO is set, its error ratio meets it too.
    """
    if slo.p99_ms is None:
        return []
    groups: dict[tuple[str, str], list[StepResult]] = {}
    for r in results:
        groups.setdefault((r.protocol, r.model), []).append(r)
    found = []
    for (protocol, model), rows in sorted(groups.items()):
        ok = [
            r
            for r in rows
            if r.requests >= MIN_P99_SAMPLES
            and r.p99_ms <= slo.p99_ms
            and (slo.error_ratio is None or r.error_ratio <= slo.error_ratio)
        ]
        best = max(ok, key=lambda r: (r.throughput_rps, r.users), default=None)
        found.append(Capacity(protocol, model, slo.p99_ms, best, max(r.users for r in rows)))
    return found
