"""Fixtures every test may use; the server fixtures live in tests/integration/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.prerequisites import MODEL_REPOSITORY


@pytest.fixture(scope="session")
def model_repository() -> Path:
    return MODEL_REPOSITORY
