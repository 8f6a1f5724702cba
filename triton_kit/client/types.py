"""Typed results returned by the SDK."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    class_id: int
    label: str
    score: float


@dataclass(frozen=True)
class Classification:
    """Top-k predictions, best first."""

    predictions: tuple[Prediction, ...]

    @property
    def top(self) -> Prediction:
        return self.predictions[0]

    @property
    def class_ids(self) -> list[int]:
        return [p.class_id for p in self.predictions]

    @property
    def scores(self) -> list[float]:
        return [p.score for p in self.predictions]


@dataclass(frozen=True)
class Timeout:
    """Deadlines in seconds: ``request`` for a whole call, ``connect`` for opening a connection."""

    request: float | None = 60.0
    connect: float = 10.0

    @classmethod
    def of(cls, value: float | Timeout | None, default: Timeout) -> Timeout:
        if value is None:
            return default
        if isinstance(value, Timeout):
            return value
        return cls(request=float(value), connect=default.connect)
