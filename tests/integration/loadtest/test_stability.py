"""perf_analyzer's stability rule: on hand-made samples, and through a real stepped run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.prerequisites import PROJECT_ROOT, require_models
from triton_kit.loadtest.reports.stability import StabilityRule, is_stable
from triton_kit.server import TritonServer

ROOT = PROJECT_ROOT
RULE = StabilityRule(window_s=1.0, tolerance=0.1, windows=3, min_samples=10)


def _samples(rates: list[int], latency_ms: list[float], begin: float = 100.0):
    """``rates[i]`` requests evenly spread over window i, each taking ``latency_ms[i]``."""
    t, ms = [], []
    for i, (rate, latency) in enumerate(zip(rates, latency_ms, strict=True)):
        t += list(begin + i + (np.arange(rate) + 0.5) / rate)
        ms += [latency] * rate
    t_arr = np.array(t)
    return t_arr, np.array(ms), np.ones(t_arr.size, bool), np.zeros(t_arr.size, np.uint16)


def test_steady_windows_are_stable_and_a_drift_is_not() -> None:
    t, ms, ok, model = _samples([50, 20, 50, 52, 49], [5.0, 9.0, 5.0, 5.2, 5.1])
    assert is_stable(RULE, t, ms, ok, model, 1, 100.0, 105.0)  # the last 3 agree
    assert not is_stable(RULE, t, ms, ok, model, 1, 100.0, 104.0)  # window 1 is 20 req/s
    t, ms, ok, model = _samples([50, 50, 50], [5.0, 5.0, 6.0])  # p99 +12.5 % of the mean
    assert not is_stable(RULE, t, ms, ok, model, 1, 100.0, 103.0)
    assert is_stable(StabilityRule(1.0, 0.2, 3, 10), t, ms, ok, model, 1, 100.0, 103.0)


def test_too_few_samples_windows_models_or_no_rule_are_not_stable() -> None:
    t, ms, ok, model = _samples([9, 9, 9], [5.0, 5.0, 5.0])
    assert not is_stable(RULE, t, ms, ok, model, 1, 100.0, 103.0)  # 9 < min_samples
    t, ms, ok, model = _samples([50, 50, 50], [5.0, 5.0, 5.0])
    assert not is_stable(RULE, t, ms, ok, model, 1, 100.0, 102.9)  # only 2 complete windows
    assert not is_stable(RULE, t, ms, ok, model, 0, 100.0, 103.0)  # no samples: a master
    assert not is_stable(StabilityRule(), t, ms, ok, model, 1, 100.0, 103.0)  # rule off
    failed = ok.copy()
    failed[t >= 102.0] = False  # the last window's requests all failed: no samples there
    assert not is_stable(RULE, t, ms, failed, model, 1, 100.0, 103.0)
    two = model.copy()
    two[::10] = 1  # a second model with 5 req/s per window
    assert not is_stable(RULE, t, ms, ok, two, 2, 100.0, 103.0)


def _run(out: Path, url: str, extra: list[str]) -> tuple[float, list[dict]]:
    command = [sys.executable, "-m", "triton_kit.loadtest", "run", "--out", str(out), "--host", url,
               "--models", "bert", "--settle-time", "1", "--stability-window", "1",
               *extra]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    took = float(re.search(r"done in ([0-9.]+) s", done.stdout)[1])
    return took, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_a_step_ends_once_stable_or_at_step_time(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    require_models("bert")
    # A loose rule: each of two 30 s steps ends after settling plus about 3 windows.
    loose = ["--steps", "1,2", "--step-time", "30", "--stability-tolerance", "1.0",
             "--min-samples", "5"]  # fmt: skip
    took, rows = _run(tmp_path / "loose", triton_server.grpc_url, loose)
    assert [r["users"] for r in rows] == [1, 2]
    assert all(r["stable"] is True for r in rows), rows
    assert took < 30, f"{took} s: the steps did not end when stable"
    # An impossible rule (no window may differ at all): each step runs its full 4 s.
    strict = ["--steps", "1", "--step-time", "4", "--stability-tolerance", "0",
              "--min-samples", "5"]  # fmt: skip
    took, rows = _run(tmp_path / "strict", triton_server.grpc_url, strict)
    assert rows[0]["stable"] is False, rows
    assert rows[0]["window_s"] >= 4 - 1 - 1.5, rows  # settle 1 s, a tick of slack
    md = (tmp_path / "strict" / "summary.md").read_text()
    assert "| stable |" in md and "| no |" in md
