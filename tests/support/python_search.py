"""The Python search over ONNX Runtime step models (``nmt --engine onnxruntime --search
python``, and the same with ``--architecture rnn``), built for the tests that exercise it.

It was the default ``nmt`` until CTranslate2's became the default, and the default
``nmt_rnn`` until the TorchScript search did (issue 31), so model_repository/ no longer holds
``nmt_encoder``/``nmt_decoder`` nor ``nmt_rnn_encoder``/``nmt_rnn_decoder``: these tests build
them themselves, once per session, into a temporary folder (seconds on the number models).
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


RNN_PYTHON_SEARCH_FLAGS = ("nmt", "--architecture", "rnn", *PYTHON_SEARCH_FLAGS[1:])
RNN_PYTHON_SEARCH_MODELS = {
    "nmt_rnn": "python",
    "nmt_rnn_encoder": "onnxruntime",
    "nmt_rnn_decoder": "onnxruntime",
}


def build_rnn_python_search(root: Path) -> Path:
    """``python -m triton_kit.build_engines nmt --architecture rnn --engine onnxruntime
    --search python`` into ``root/repo``: the repository, checked to hold exactly that search's
    models (``nmt_rnn`` running ONNX Runtime in its stub over the two step models)."""
    repository, _ = build_repository(root, *RNN_PYTHON_SEARCH_FLAGS, "--instances", "1")
    assert model_backends(repository) == RNN_PYTHON_SEARCH_MODELS, model_backends(repository)
    return repository
