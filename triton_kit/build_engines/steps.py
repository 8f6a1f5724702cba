"""Run a build as named steps with progress output (in the spirit of Model Navigator).

Each step prints when it starts and ends OK, SKIPPED or FAIL with its duration,
so a long build is never silent and a failure says which step broke.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class StepSkipped(Exception):
    """Raised inside a step that does not apply; the reason is printed."""


class BuildError(RuntimeError):
    """A step failed; the message names the step and the cause."""


@dataclass
class StepLog:
    title: str
    total: int
    done: int = 0
    results: list[tuple[str, str, float]] = field(default_factory=list)

    def run(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        self.done += 1
        prefix = f"[{self.title} {self.done}/{self.total}] {name}"
        print(f"{prefix} ...", flush=True)
        start = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except StepSkipped as skip:
            self._finish(prefix, name, "SKIPPED", start, str(skip))
            return None
        except Exception as exc:
            self._finish(prefix, name, "FAIL", start, f"{type(exc).__name__}: {exc}")
            raise BuildError(f"step '{name}' failed: {exc}") from exc
        self._finish(prefix, name, "OK", start)
        return result

    def _finish(self, prefix: str, name: str, status: str, start: float, note: str = "") -> None:
        elapsed = time.perf_counter() - start
        self.results.append((name, status, elapsed))
        suffix = f" ({note})" if note else ""
        stream = sys.stderr if status == "FAIL" else sys.stdout
        print(f"{prefix} {status} in {elapsed:.1f} s{suffix}", file=stream, flush=True)


def info(message: str) -> None:
    print(f"    {message}", flush=True)


def warn(message: str) -> None:
    print(f"\n!!! WARNING: {message}\n", file=sys.stderr, flush=True)
