"""The Python search over ONNX Runtime step models (``nmt --engine onnxruntime --search
python``), built for the tests that exercise it.

It was the default ``nmt`` until CTranslate2's became the default (issue 31), so
model_repository/ no longer holds ``nmt_encoder``/``nmt_decoder``: these tests build it
themselves, once per session, into a temporary folder (a few seconds on the number model).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.served_build import build_repository
from triton_kit.server.model_backends import model_backends

PYTHON_SEARCH_FLAGS = ("nmt", "--engine", "onnxruntime", "--search", "python")
PYTHON_SEARCH_MODELS = {"nmt": "python", "nmt_encoder": "onnxruntime", "nmt_decoder": "onnxruntime"}


def build_python_search(root: Path) -> Path:
    """``python -m triton_kit.build_engines nmt --engine onnxruntime --search python`` into
    ``root/repo``: the repository, checked to hold exactly that search's models."""
    repository, _ = build_repository(root, *PYTHON_SEARCH_FLAGS, "--instances", "1")
    assert model_backends(repository) == PYTHON_SEARCH_MODELS, model_backends(repository)
    return repository
