"""TensorRT defect 10 (issue 9; the others: tests/unit/build_engines/test_tensorrt_defects.py):
a dry run of an INT8 TensorRT build prints its plan and trtexec command and writes nothing.
A real ``python -m triton_kit.build_engines`` process, so it takes tens of seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT


@pytest.mark.slow
def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    work, repo = tmp_path / "work", tmp_path / "repo"
    flags = ["--dry-run", "--precision", "int8", "--engine", "tensorrt"]
    paths = ["--work-dir", str(work), "--output-repository", str(repo)]
    result = subprocess.run(
        [sys.executable, "-m", "triton_kit.build_engines", "resnet50", *flags, *paths],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "plan of work for resnet50_model" in result.stdout
    assert "--maxShapes=pixel_values:16x3x224x224" in result.stdout
    assert not work.exists() and not repo.exists()
