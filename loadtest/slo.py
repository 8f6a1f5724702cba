"""Service-level objectives: a breach is a sentence naming protocol, model, step and value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.summary import StepResult


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
