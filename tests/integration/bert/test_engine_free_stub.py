"""The served ``bert`` needs no engine library in its python stub (issue 31).

``bert`` tokenises in its stub and calls ``bert_model`` through BLS; Triton's own
onnxruntime backend runs the encoder. Two checks against the real Triton:

- A server of ``bert`` and ``bert_model`` alone whose python stubs run in an environment
  where ``import onnxruntime`` and ``import torch`` fail. The stub runs Python isolated
  (PYTHONPATH ignored) with the virtual environment of the ``python3`` first on PATH
  (triton_kit/server/binary.py ``server_environment``; ``TRITON_KIT_STUB_PYTHON`` picks
  it), so the test gives it one of its own: this venv's packages and the project through a
  .pth file, and a ``sitecustomize`` that puts a finder refusing both first on
  ``sys.meta_path`` and logs every attempt and the pid of every interpreter it starts in.
  A probe model in the same server tries both imports at load: the control that the
  blocker is in effect. The ``bert`` stub must show the blocker loaded and no attempt. The
  embeddings are compared with sentence-transformers on the same checkpoint (cosine >=
  0.9999, as tests/integration/bert/test_bert.py).
- On the session's server, with onnxruntime installed, the ``bert`` stub and the default
  ``nmt_rnn``'s (its TorchScript search runs in Triton's pytorch backend) have not mapped ONNX
  Runtime's Python module (``onnxruntime_pybind11_state``) nor libtorch (``/proc/<pid>/maps``),
  and the default ``nmt`` has no stub at all where it is the kit's ctranslate2 backend in text
  mode (the python ``nmt`` of ``--no-ct2-text`` is checked in
  tests/integration/nmt/test_ctranslate2_served.py); the ``nmt_rnn`` stub of a Python-search
  build (``--architecture rnn --engine onnxruntime --search python``), which runs ONNX Runtime
  itself, has: the control that shows the check can see a mapped engine.

tests/integration/test_default_repository_engine_free.py serves the whole default repository
with the blocking stub environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.bert.test_bert import SENTENCES, assert_matches, expected
from tests.support.engine_free import (
    assert_blocked_and_untried,
    engine_free_server,
    mapped_engines,
    stub_pids,
)
from tests.support.prerequisites import require_models
from tests.support.served_build import serving
from triton_kit.client import TritonClient
from triton_kit.server import TritonServer
from triton_kit.server.model_backends import model_backends


@pytest.fixture(scope="module")
def blocked_server(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TritonServer, Path]]:
    require_models("bert", "bert_model")
    root = tmp_path_factory.mktemp("engine-free")
    with engine_free_server(model_repository, ("bert", "bert_model"), root) as served:
        yield served


@pytest.fixture(scope="module")
def reference(model_repository: Path) -> Any:
    from tests.integration.bert.test_bert import checkpoint_dir

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(checkpoint_dir(model_repository)), device="cpu")


def test_bert_serves_from_a_stub_that_cannot_import_an_engine(
    blocked_server: tuple[TritonServer, Path], reference: Any
) -> None:
    server, log = blocked_server
    with TritonClient(server.grpc_url, timeout=120) as client:
        served = client.embed(SENTENCES)
    assert_matches(served, expected(reference, SENTENCES), SENTENCES)
    assert_blocked_and_untried(server, log, "bert")


def test_the_default_stubs_map_no_engine(
    triton_server: TritonServer,
    model_repository: Path,
    nmt_rnn_python_search: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_models("bert", "nmt", "nmt_rnn")
    with TritonClient(triton_server.grpc_url, timeout=120) as client:
        client.embed(["map check"])
        client.translate("four hundred")
        client.translate("four hundred", model="nmt_rnn")
    (bert,) = stub_pids(triton_server, "bert")
    assert mapped_engines(bert) == set()
    assert model_backends(model_repository)["nmt"] == "ctranslate2"  # the default: text mode
    assert stub_pids(triton_server, "nmt") == []  # it answered, with no python stub at all
    stubs = [
        name for name in ("nmt", "nmt_rnn") if model_backends(model_repository)[name] == "python"
    ]
    assert "nmt_rnn" in stubs  # the default nmt_rnn is a python model in front of its engine
    for name in stubs:
        pids = stub_pids(triton_server, name)
        assert pids and all(mapped_engines(p) == set() for p in pids), name
    # The control: the Python search's nmt_rnn runs ONNX Runtime in its stub, and is seen.
    log = tmp_path_factory.mktemp("engine-free-control") / "tritonserver.log"
    with serving(nmt_rnn_python_search, log) as control:
        with TritonClient(control.grpc_url, timeout=120) as client:
            assert client.translate("four hundred", model="nmt_rnn") == ["quatre cents"]
        controls = stub_pids(control, "nmt_rnn")
        assert controls and all("onnxruntime_pybind11_state" in mapped_engines(p) for p in controls)
