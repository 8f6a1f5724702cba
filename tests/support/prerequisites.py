"""What a test needs from the machine: the project root, built models, installed tools."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MODEL_REPOSITORY = Path(os.environ.get("MODEL_REPOSITORY", PROJECT_ROOT / "model_repository"))


def require_models(*names: str) -> None:
    """Fail (not skip) when a model the test needs was not built: `make test` builds them."""
    missing = [n for n in names if not (MODEL_REPOSITORY / n / "config.pbtxt").exists()]
    if missing:
        pytest.fail(
            f"models {missing} are not in {MODEL_REPOSITORY}; run `make models` "
            "(make test does this first)"
        )


def require_tool(name: str) -> str:
    """Path of an installed tool; skip with the install hint, or fail under CI."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found:
        return found
    message = f"{name} is not installed: run `bash scripts/install-system-deps.sh`"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must run it before the tests)")
    pytest.skip(message)
