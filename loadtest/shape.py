"""A stepped load: hold each concurrency for ``--step-time`` seconds, then stop by itself.

A step of N means N users per unit of user weight (so with the default weights of 1,
N users of every selected model). The test ends after the last step or at ``--run-time``,
whichever comes first, so a headless run always exits on its own.
"""

from __future__ import annotations

from typing import Any

from locust import LoadTestShape

from loadtest import recorder
from loadtest.options import parse_steps

SPAWN_RATE = 100.0  # users/s: a step should be reached at once, not ramped


class SteppedShape(LoadTestShape):
    """Reads --steps, --step-time, --settle-time and --run-time."""

    use_common_options = True  # it honours --run-time; --users/--spawn-rate are not used

    def _plan(self) -> tuple[list[int], float, float, float | None]:
        options = self.runner.environment.parsed_options
        steps = parse_steps(getattr(options, "steps", "1"))
        step_time = float(getattr(options, "step_time", 10.0))
        settle = min(float(getattr(options, "settle_time", 0.0)), step_time / 2)
        run_time = getattr(options, "run_time", None)
        return steps, step_time, settle, float(run_time) if run_time else None

    def _weight_units(self) -> int:
        return sum(max(1, int(getattr(cls, "weight", 1))) for cls in self.runner.user_classes)

    def tick(self) -> tuple[int, float] | None:
        steps, step_time, settle, run_time = self._plan()
        elapsed = self.get_run_time()
        rec = recorder.current()
        if elapsed >= len(steps) * step_time or (run_time is not None and elapsed >= run_time):
            if rec is not None:
                rec.end()
            return None
        index = int(elapsed // step_time)
        if rec is not None:
            self._mark(rec, index, steps[index], elapsed - index * step_time >= settle)
        return steps[index] * self._weight_units(), SPAWN_RATE

    @staticmethod
    def _mark(rec: Any, index: int, users: int, settled: bool) -> None:
        if not rec.steps or rec.steps[-1].index != index:
            rec.begin_step(index, users)
        if settled:
            rec.begin_measure()
