"""The stepped-run summary: small-sample p99s are flagged and each report names its window."""

from __future__ import annotations

from loadtest.report import MIN_P99_SAMPLES, markdown
from loadtest.summary import StepResult


def _step(requests: int, p99: float) -> StepResult:
    return StepResult("grpc", "bert", 1, 5.0, requests, 0, 1.0, 2.0, 3.0, p99, 10.0, ())


def test_p99_from_few_samples_is_flagged_and_windows_are_named() -> None:
    text = markdown([_step(3, 9.87), _step(MIN_P99_SAMPLES, 4.56)])
    rows = [line for line in text.splitlines() if line.startswith("| grpc | bert")]
    assert "| 9.87 † |" in rows[0], rows[0]
    assert "| 4.56 |" in rows[1] and "†" not in rows[1], rows[1]
    assert "Locust's own `<protocol>/locust.html`" in text and "settle" in text
