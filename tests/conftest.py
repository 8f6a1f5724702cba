"""Fixtures every test may use; the server fixtures live in tests/integration/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.prerequisites import MODEL_REPOSITORY


@pytest.fixture(scope="session")
def model_repository() -> Path:
    return MODEL_REPOSITORY


@pytest.fixture(scope="session")
def nmt_python_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of the Python search over ONNX Runtime step models (``nmt``,
    ``nmt_encoder``, ``nmt_decoder``): no longer the default build, so built for the session."""
    from tests.support.python_search import build_python_search

    return build_python_search(tmp_path_factory.mktemp("nmt-python-search"))


@pytest.fixture(scope="session")
def nmt_rnn_python_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of the recurrent model's Python search over ONNX Runtime step models
    (``nmt_rnn``, ``nmt_rnn_encoder``, ``nmt_rnn_decoder``): no longer the default build (the
    TorchScript search is), so built for the session."""
    from tests.support.python_search import build_rnn_python_search

    return build_rnn_python_search(tmp_path_factory.mktemp("nmt-rnn-python-search"))
