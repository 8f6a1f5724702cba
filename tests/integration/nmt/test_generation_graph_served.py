"""``build_engines nmt --search engine``: the whole search inside ONNX Runtime, served by
Triton's own onnxruntime backend as ``nmt_generate``, translates as Hugging Face ``generate``
does. The ``nmt`` python model only tokenises, pads its batch, makes ONE BLS call per batch and
detokenises (issue 31): its stub runs here in an environment where ``import onnxruntime``,
``import torch`` and ``import onnx`` fail (tests/support/engine_free.py), and translates.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.batching import counts_at_rest, settled_counts
from tests.support.engine_free import (
    add_probe,
    assert_blocked_and_untried,
    engine_free_environment,
    stub_environment,
)
from tests.support.nmt_reference import InProcess, hf_generate
from tests.support.nmt_requests import rows_request
from tests.support.served_build import build_repository, serving
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.client import InvalidInputError, TritonClient
from triton_kit.server import TritonServer
from triton_kit.server.model_backends import model_backends

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses"),
]
BLOCKED = ("onnxruntime", "torch", "onnx")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nmt-engine")
    flags = ("nmt", "--engine", "onnxruntime", "--search", "engine", "--instances", "1")
    repo, _ = build_repository(root, *flags)
    assert model_backends(repo)["nmt_generate"] == "onnxruntime"
    return repo


@pytest.fixture(scope="module")
def blocked(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """``nmt`` and ``nmt_generate`` alone (links to the built files), the stubs unable to
    import an engine, and the probe that shows they cannot."""
    root = tmp_path_factory.mktemp("nmt-engine-free")
    for name in ("nmt", "nmt_generate"):
        shutil.copytree(built / name, root / "repo" / name, copy_function=os.symlink)
    add_probe(root / "repo", BLOCKED)
    python = engine_free_environment(root / "env", BLOCKED)
    log = root / "blocker.log"
    with contextlib.ExitStack() as stack:
        with stub_environment(python, log):  # the stubs start with the server
            server = stack.enter_context(serving(root / "repo", root / "tritonserver.log"))
        yield server, log


@pytest.fixture(scope="module")
def engine_server(blocked: tuple) -> TritonServer:
    return blocked[0]


@pytest.fixture(scope="module")
def model():
    from transformers import MarianMTModel, MarianTokenizer

    checkpoint = str(DEFAULT_CHECKPOINT)
    return MarianMTModel.from_pretrained(checkpoint), MarianTokenizer.from_pretrained(checkpoint)


def _reference(model, texts: list[str], beam: int, max_length: int) -> list[str]:
    marian, tokenizer = model
    penalty = marian.generation_config.length_penalty or 1.0  # HF's default when unset
    ids = hf_generate(marian, tokenizer, texts, beam, max_length, penalty)
    return tokenizer.batch_decode(ids, skip_special_tokens=True)


def _held_out(count: int | None = None) -> list[int]:
    return list(corpus.Split.load(DEFAULT_CHECKPOINT / "split.json").test)[:count]


@pytest.mark.parametrize("beam", [1, 4])
def test_served_graph_matches_hf_generate(engine_server: TritonServer, model, beam: int) -> None:
    texts = [corpus.english(n) for n in _held_out(12)]
    with TritonClient(engine_server.grpc_url) as triton:
        served = triton.translate(texts, beam_size=beam, max_length=64)
    assert served == _reference(model, texts, beam, 64)


def test_held_out_exact_match_through_the_engine(engine_server, model, built: Path) -> None:
    """Every held-out number through the served engine path, beam 4 (the default): the
    translations of the Python search over the same build's step models, and as exact."""
    numbers = _held_out()
    texts, references = [corpus.english(n) for n in numbers], [corpus.french(n) for n in numbers]
    local = InProcess(
        model[0],
        built / "nmt" / "1",
        built / "nmt_encoder" / "1" / "model.onnx",
        built / "nmt_decoder" / "1" / "model.onnx",
    ).translate(texts, beam=4, max_length=64)
    with TritonClient(engine_server.grpc_url, timeout=300) as triton:
        served = triton.translate(texts, beam_size=4)
    exact = sum(s == r for s, r in zip(served, references, strict=True))
    assert served == local
    assert exact == sum(s == r for s, r in zip(local, references, strict=True))
    assert exact >= 0.95 * len(texts), f"{exact}/{len(texts)}"


def test_a_batch_is_one_engine_call_with_each_rows_settings(engine_server, model) -> None:
    """One request of rows with different beams and limits: ONE nmt_generate call, each row
    as HF gives it with its own settings (a limit of 2 is answered without the engine)."""
    texts = [corpus.english(n) for n in _held_out(6)]
    beams, limits = [1, 4, 1, 4, 2, 3], [64, 64, 6, 7, 2, 9]
    url = engine_server.grpc_url
    before = counts_at_rest(url, "nmt_generate")
    served = rows_request(url, texts, beams, limits)
    after = settled_counts(url, "nmt_generate", before, 1)
    expected = [
        _reference(model, [t], b, m)[0] for t, b, m in zip(texts, beams, limits, strict=True)
    ]
    assert served == expected
    assert after[0] - before[0] == 1


def test_concurrent_requests_share_one_engine_call(engine_server) -> None:
    """Requests the dynamic batcher gave one ``nmt`` execute reach nmt_generate together:
    fewer engine calls than requests. Each client's channel is ready and all send at once
    (a barrier): under the full suite's load on two cores, clients that each connected first
    sent one after another, and each request had an execute of its own (16 of 16)."""
    texts = [corpus.english(n) for n in _held_out(16)]
    url = engine_server.grpc_url
    before = counts_at_rest(url, "nmt_generate")[0]
    start = threading.Barrier(len(texts))

    def one(text: str) -> str:
        with TritonClient(url, timeout=60) as triton:
            assert triton.server_ready()
            start.wait(timeout=60)
            return triton.translate([text], beam_size=4)[0]

    with ThreadPoolExecutor(len(texts)) as pool:
        served = list(pool.map(one, texts))
    assert len(set(served)) == len(texts)
    # BLS answers before Triton counts the engine's calls: read them once they are at rest.
    calls = counts_at_rest(url, "nmt_generate")[0] - before
    assert 0 < calls < len(texts)


def test_a_bad_request_fails_alone(engine_server: TritonServer) -> None:
    with TritonClient(engine_server.grpc_url) as triton:
        results = triton.translate(
            ["seven", "x" * 100_000, "twelve"], beam_size=2, return_exceptions=True
        )
        assert isinstance(results[1], InvalidInputError)
        assert results[0] == "sept" and results[2] == "douze"
        assert triton.server_ready()


def test_the_stub_imports_no_engine(blocked: tuple) -> None:
    """Runs last: the nmt stub has served every test above without trying to import
    onnxruntime, torch or onnx, and maps no engine library; the probe shows it could not."""
    server, log = blocked
    with TritonClient(server.grpc_url) as triton:
        assert triton.translate("seven") == ["sept"]
    assert_blocked_and_untried(server, log, "nmt", BLOCKED)
