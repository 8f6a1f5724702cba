"""A stepped load: hold each concurrency for ``--step-time`` seconds (or until stable), then stop.

A step of N means N users per unit of user weight (so with the default weights of 1,
N users of every selected model). The test ends after the last step or at ``--run-time``,
whichever comes first, so a headless run always exits on its own.
"""

from __future__ import annotations

import time
from typing import Any

from locust import LoadTestShape

from triton_kit.loadtest import recorder
from triton_kit.loadtest.options import parse_steps, stability_rule

SPAWN_RATE = 100.0  # users/s: a step should be reached at once, not ramped


class SteppedShape(LoadTestShape):
    """Reads --steps, --step-time, --settle-time, --run-time and the --stability-* options.

    Without a stability window every step lasts --step-time. With one, a step ends as soon
    as its samples meet the stability rule (checked at each tick, once a second), or at
    --step-time, whichever comes first; the run ends after the last step or --run-time.
    """

    use_common_options = True  # it honours --run-time; --users/--spawn-rate are not used

    _index = 0
    _began = 0.0  # run time at which the current step began

    def _plan(self) -> tuple[list[int], float, float, float | None]:
        options = self.runner.environment.parsed_options
        steps = parse_steps(getattr(options, "steps", "1"))
        step_time = float(getattr(options, "step_time", 10.0))
        settle = min(float(getattr(options, "settle_time", 0.0)), step_time / 2)
        run_time = getattr(options, "run_time", None)
        return steps, step_time, settle, float(run_time) if run_time else None

    def _weight_units(self) -> int:
        return sum(max(1, int(getattr(cls, "weight", 1))) for cls in self.runner.user_classes)

    def _step_done(self, rec: Any, in_step: float, step_time: float, settle: float) -> bool:
        if in_step >= step_time:
            return True
        rule = stability_rule(self.runner.environment.parsed_options)
        if not rule.enabled or rec is None or in_step < settle or not rec.steps:
            return False
        step = rec.steps[-1]
        if step.index != self._index or step.measure_start is None:
            return False
        return rec.is_stable(rule, step.measure_start, time.time())

    def tick(self) -> tuple[int, float] | None:
        steps, step_time, settle, run_time = self._plan()
        elapsed = self.get_run_time()
        if elapsed < self._began:  # a new run of the same shape (web UI): start over
            self._index, self._began = 0, 0.0
        rec = recorder.current()
        if self._step_done(rec, elapsed - self._began, step_time, settle):
            self._index, self._began = self._index + 1, elapsed
        if self._index >= len(steps) or (run_time is not None and elapsed >= run_time):
            if rec is not None:
                rec.end()
            return None
        if rec is not None:
            self._mark(rec, self._index, steps[self._index], elapsed - self._began >= settle)
        return steps[self._index] * self._weight_units(), SPAWN_RATE

    @staticmethod
    def _mark(rec: Any, index: int, users: int, settled: bool) -> None:
        if not rec.steps or rec.steps[-1].index != index:
            rec.begin_step(index, users)
        if settled:
            rec.begin_measure()
