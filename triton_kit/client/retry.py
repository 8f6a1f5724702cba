"""The retry decision shared by both twins: which errors, how long to wait, within the deadline."""

from __future__ import annotations

import time

from triton_kit.client.errors import TritonClientError
from triton_kit.client.options import Retry


class RetryLoop:
    """One call's attempts: the time left, and the wait before the next attempt (or none)."""

    def __init__(self, policy: Retry, total: float | None, enabled: bool = True) -> None:
        self.total = total
        self.started = time.monotonic()
        self.attempt = 1
        self._delays = policy.delays() if enabled else iter(())

    def remaining(self) -> float | None:
        """Seconds left of the call's deadline (None: no deadline); never below 1 ms."""
        if self.total is None:
            return None
        return max(self.total - (time.monotonic() - self.started), 0.001)

    def next_delay(self, error: TritonClientError) -> float | None:
        """Seconds to wait before retrying ``error``; None to give up and raise it."""
        if not error.retryable:
            return None
        delay = next(self._delays, None)
        if delay is None:
            return None
        if self.total is not None:
            left = self.total - (time.monotonic() - self.started)
            if delay >= left - 0.001:
                return None
        self.attempt += 1
        return delay
