"""scripts/gpu/goals.sh's step lines, which goals_report reads to tell which steps a call ran
and how each ended."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_step_line_gives_the_steps_own_exit_status(tmp_path: Path) -> None:
    """goals.sh printed "exit $?" after a $(date) in the same line, so every step read "exit 0",
    even one the call's deadline had killed (session 43's calls 1 and 3). Mocked: python3 is a
    stub that fails, as the steps need the GPU machine's setup."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "python3").write_text("#!/bin/sh\nexit 3\n")
    (stubs / "python3").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "GOALS_STEPS": "pytest",
           "GOALS_BUDGET_S": "0"}  # fmt: skip
    script = ROOT / "scripts/gpu/goals.sh"
    done = subprocess.run(["bash", str(script), str(tmp_path), str(out)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    steps = [ln for ln in done.stdout.splitlines() if ": exit " in ln]
    assert len(steps) == 1 and steps[0].endswith("] pytest: exit 3"), done.stdout
