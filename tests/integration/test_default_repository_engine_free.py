"""The default repository serves with python stubs that cannot import an engine (issue 31).

Every model ``make models`` builds (the resnet50, bert, nmt and nmt_rnn families, as
model_repository/ holds them: links to the built files, no copies) is served by one Triton
whose python stubs run in an environment where ``import onnxruntime`` and ``import torch``
fail (tests/support/engine_free.py: a ``sitecustomize`` blocker that logs every attempt and
the pid of every interpreter it starts in, and a probe model whose imports must fail, the
control). Every model a user calls is called and checked against the references of the
per-model tests:

- ``resnet50`` (encoded bytes) and ``resnet50_uint8`` (decoded pixels): the classes and
  scores of tests/support/reference.py (PIL, numpy and ONNX Runtime in this process);
- ``bert``: sentence-transformers on the same checkpoint (cosine >= 0.9999);
- ``nmt`` and ``nmt_rnn``: the exact French of held-out numbers (num2words).

Then every python model's stub (whichever are python: ``nmt`` may be a python model in front
of ``nmt_ct2`` or the ctranslate2 backend itself) must show the blocker loaded, no blocked
import tried, and no engine library mapped. The default ``nmt_rnn`` is the TorchScript search
in Triton's pytorch backend behind a python ``nmt_rnn`` that imports no engine: the Python
search over ONNX Runtime step models (``--engine onnxruntime --search python``) is opt-in.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.integration.bert.test_bert import SENTENCES, assert_matches, expected
from tests.support.engine_free import (
    assert_blocked_and_untried,
    engine_free_server,
    stub_pids,
)
from tests.support.images import case_bytes
from tests.support.prerequisites import require_models
from tests.support.reference import imagenet_label, resnet50_reference
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.client import Classification, TritonClient
from triton_kit.server import TritonServer
from triton_kit.server.model_backends import model_backends

pytestmark = [
    pytest.mark.slow,  # the whole default repository in one more server
    pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses"),
]

# What `make models` builds: the models users call, each family's front door.
CALLED = ("resnet50", "resnet50_uint8", "bert", "nmt", "nmt_rnn")
SCORE_TOLERANCE = 1e-4
IMAGES = ("320x240-RGB-JPEG", "300x200-L-JPEG")
NUMBERS = 12  # held-out numbers translated by each NMT model


@pytest.fixture(scope="module")
def blocked_server(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TritonServer, Path, dict[str, str]]]:
    """Triton on every model of model_repository/, its python stubs under the blocker."""
    require_models(*CALLED, "nmt_rnn_generate")
    backends = model_backends(model_repository)
    root = tmp_path_factory.mktemp("default-engine-free")
    with engine_free_server(model_repository, list(backends), root) as (server, log):
        yield server, log, backends


@pytest.fixture(scope="module")
def bert_reference(model_repository: Path) -> Any:
    from tests.integration.bert.test_bert import checkpoint_dir

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(checkpoint_dir(model_repository)), device="cpu")


def _assert_reference(result: Classification, repository: Path, data: bytes) -> None:
    ids, scores = resnet50_reference(repository, data)
    assert result.class_ids == ids.tolist()
    np.testing.assert_allclose(result.scores, scores, rtol=0, atol=SCORE_TOLERANCE)
    assert [p.label for p in result.predictions] == [imagenet_label(i) for i in ids]


def test_the_default_repository_serves_without_an_engine_in_any_stub(
    blocked_server: tuple[TritonServer, Path, dict[str, str]],
    model_repository: Path,
    bert_reference: Any,
) -> None:
    server, log, backends = blocked_server
    assert backends["nmt_rnn"] == "python" and backends["nmt_rnn_generate"] == "pytorch"
    assert not {"nmt_rnn_encoder", "nmt_rnn_decoder"} & set(backends)  # not the Python search
    cases = dict(case_bytes())
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    numbers = list(split.test)[:NUMBERS]
    english = [corpus.english(n) for n in numbers]
    french = [corpus.french(n) for n in numbers]
    with TritonClient(server.grpc_url, timeout=120) as client:
        for name in IMAGES:
            data = cases[name]
            _assert_reference(client.classify(data), model_repository, data)  # resnet50
            pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
            _assert_reference(client.classify(pixels), model_repository, data)  # resnet50_uint8
        assert_matches(client.embed(SENTENCES), expected(bert_reference, SENTENCES), SENTENCES)
        for model in ("nmt", "nmt_rnn"):
            assert client.translate(english, model=model) == french, model
            assert client.translate(["seven"], beam_size=1, model=model) == ["sept"], model
    python_models = sorted(name for name, backend in backends.items() if backend == "python")
    assert {"bert", "nmt_rnn", "resnet50_preprocess"} <= set(python_models), python_models
    for model in python_models:
        pids = stub_pids(server, model)
        assert pids, f"no stub serves {model}"
        for pid in pids:
            assert_blocked_and_untried(server, log, model, pid=pid)
