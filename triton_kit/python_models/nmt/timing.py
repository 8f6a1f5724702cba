"""A step model that reports where a search's time goes: one wrapper for the served ``nmt``
model's profile (``TRITON_KIT_PROFILE_DIR``) and the benchmarks' in-process timers.

Phases: ``encode``, ``step`` (waited for on a device: a CUDA step returns before its
kernels end), ``candidates`` (each row's best tokens, where the model picks them) and
``take`` (the beam reorder, where the model keeps its state). Python 3.10 compatible.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

AddTime = Callable[[str, float], None]


class TimedStepModel:
    """The wrapped model's calls, each timed into ``add(phase, seconds)``."""

    def __init__(self, model: Any, add: AddTime) -> None:
        self.model, self.add = model, add
        for phase in ("candidates", "take"):  # only where the model has them
            if hasattr(model, phase):
                setattr(self, phase, self._timed(phase, getattr(model, phase)))

    def _timed(self, phase: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return call(*args)
            finally:
                self.add(phase, time.perf_counter() - start)

        return timed

    def encode(self, input_ids, attention_mask):
        return self._timed("encode", self.model.encode)(input_ids, attention_mask)

    @property
    def reorders(self) -> bool:
        """The wrapped model's: the search then hands it ``beam_index`` (see nmt_decode)."""
        return bool(getattr(self.model, "reorders", False))

    def step(self, input_ids, attention_mask, cross_kv, past_kv, *beam_index):
        start = time.perf_counter()
        try:
            return self.model.step(input_ids, attention_mask, cross_kv, past_kv, *beam_index)
        finally:
            synchronize = getattr(self.model, "synchronize", None)
            if synchronize is not None:
                synchronize()
            self.add("step", time.perf_counter() - start)
