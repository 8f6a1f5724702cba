"""Tests that need no server but take seconds to minutes: they build models (export, train,
dry-run builds) or run a benchmark as a subprocess. Every test here is marked ``build``
(deselect with ``-m 'not build'``); starting a tritonserver from here fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.no_server import no_triton  # noqa: F401  (autouse)

BUILD = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/build/ ``build``."""
    for item in items:
        if BUILD in item.path.parents:
            item.add_marker(pytest.mark.build)
