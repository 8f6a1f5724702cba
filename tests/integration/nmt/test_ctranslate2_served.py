"""``build_engines nmt --no-ct2-text`` (``--engine ctranslate2``, the default's engine, with the
python ``nmt`` in front, the default layout until the text mode: the default build itself is
tests/integration/nmt/test_ct2_text_served.py): the Marian checkpoint converted by CTranslate2
(int8), served by the kit's own C++ backend ``ctranslate2`` as ``nmt_ct2``. The ``nmt`` python
model tokenises, sends its batch's ids in ONE BLS call and detokenises; its stub runs here where
``import ctranslate2``, ``import onnxruntime`` and ``import torch`` fail.

References: the num2words French of every held-out number, and the same converted model run
in process by the ``ctranslate2`` package (the library the backend links) with the served
settings: the served translations must be exactly those.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.batching import (
    counts_at_rest,
    first_co_batched,
    settled_counts,
)
from tests.support.engine_free import (
    add_probe,
    assert_blocked_and_untried,
    engine_free_environment,
    stub_environment,
)
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

BLOCKED = ("ctranslate2", "onnxruntime", "torch")
CT2 = "nmt_ct2"


@pytest.fixture(scope="module")
def backend() -> Path:
    """``python -m triton_kit.server.native_backends build ctranslate2`` into the launcher's
    backend folder (skipped when an identical build is there)."""
    from triton_kit.server.native_backends import default_out
    from triton_kit.server.native_backends.__main__ import main
    from triton_kit.server.native_backends.build import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip(f"cannot build the ctranslate2 backend: {', '.join(missing)} not found")
    assert main(["build", "ctranslate2"]) == 0, "building the ctranslate2 backend failed"
    return default_out() / "ctranslate2" / "libtriton_ctranslate2.so"


@pytest.fixture(scope="module")
def built(backend: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nmt-ct2")
    # The default's engine (no --engine), written as the python nmt in front of nmt_ct2.
    repo, log = build_repository(root, "nmt", "--no-ct2-text", "--instances", "1")
    assert "nmt_ct2 (int8) vs references, beam 4: 16/16 exact" in log
    assert model_backends(repo) == {"nmt": "python", CT2: "ctranslate2"}
    return repo


@pytest.fixture(scope="module")
def blocked(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """``nmt`` and ``nmt_ct2`` (links to the built files), the stubs unable to import an
    engine, and the probe that shows they cannot."""
    root = tmp_path_factory.mktemp("nmt-ct2-engine-free")
    for name in ("nmt", CT2):
        shutil.copytree(built / name, root / "repo" / name, copy_function=os.symlink)
    add_probe(root / "repo", BLOCKED)
    python = engine_free_environment(root / "env", BLOCKED)
    log = root / "blocker.log"
    with contextlib.ExitStack() as stack:
        with stub_environment(python, log):  # the stubs start with the server
            server = stack.enter_context(serving(root / "repo", root / "tritonserver.log"))
        yield server, log


@pytest.fixture(scope="module")
def server(blocked: tuple) -> TritonServer:
    return blocked[0]


@pytest.fixture(scope="module")
def in_process(built: Path):
    """``translate(texts, beam, max_length)``: the converted model in this process, with the
    settings the backend serves (patience 2, HF's max_length minus the start token)."""
    import ctranslate2

    from triton_kit.python_models.nmt.generate import CT2_PATIENCE

    translator = ctranslate2.Translator(
        str(built / CT2 / "1"), device="cpu", compute_type="int8", intra_threads=1
    )
    import sentencepiece as spm

    source = spm.SentencePieceProcessor(model_file=str(built / "nmt" / "1" / "source.spm"))

    def translate(texts: list[str], beam: int, max_length: int = 64) -> list[str]:
        tokens = [[*source.encode(t, out_type=str), "</s>"] for t in texts]
        results = translator.translate_batch(
            tokens, beam_size=beam, max_decoding_length=max_length - 1, patience=CT2_PATIENCE
        )
        return ["".join(r.hypotheses[0]).replace("\u2581", " ").strip() for r in results]

    return translate


def _held_out(count: int | None = None) -> list[int]:
    return list(corpus.Split.load(DEFAULT_CHECKPOINT / "split.json").test)[:count]


def test_held_out_exact_match_through_the_backend(server, in_process) -> None:
    """Every held-out number, beam 4 (the default): the in-process model's translations,
    and as exact against num2words."""
    numbers = _held_out()
    texts, references = [corpus.english(n) for n in numbers], [corpus.french(n) for n in numbers]
    with TritonClient(server.grpc_url, timeout=300) as triton:
        served = triton.translate(texts, beam_size=4)
    exact = sum(s == r for s, r in zip(served, references, strict=True))
    print(f"served nmt -> nmt_ct2 (int8, --no-ct2-text), beam 4: {exact}/{len(texts)} exact")
    assert served == in_process(texts, 4)
    assert exact >= 0.95 * len(texts), f"{exact}/{len(texts)}"


@pytest.mark.parametrize("beam", [1, 4])
def test_greedy_and_beam_match_in_process(server, in_process, beam: int) -> None:
    texts = [corpus.english(n) for n in _held_out(12)]
    with TritonClient(server.grpc_url, timeout=60) as triton:
        served = triton.translate(texts, beam_size=beam, max_length=64)
    assert served == in_process(texts, beam)
    assert len(set(served)) > 6  # real, distinct translations


def test_a_batch_is_one_call_with_each_rows_settings(server, in_process) -> None:
    """One request of rows with different beams and limits: ONE nmt_ct2 call, each row as
    the in-process model gives it with its own settings."""
    texts = [corpus.english(n) for n in _held_out(6)]
    beams, limits = [1, 4, 1, 4, 2, 3], [64, 64, 6, 7, 64, 9]
    url = server.grpc_url
    before = counts_at_rest(url, CT2)
    served = rows_request(url, texts, beams, limits)
    after = settled_counts(url, CT2, before, len(texts))
    expected = [in_process([t], b, m)[0] for t, b, m in zip(texts, beams, limits, strict=True)]
    assert served == expected
    assert (after[0] - before[0], after[1] - before[1]) == (1, 6)


def _ids_request(ids: np.ndarray, beam: int = 4) -> list[grpcclient.InferInput]:
    source = grpcclient.InferInput("SOURCE_IDS", list(ids.shape), _triton_type(ids))
    source.set_data_from_numpy(ids)
    beams = grpcclient.InferInput("BEAM_SIZE", [ids.shape[0], 1], "INT32")
    beams.set_data_from_numpy(np.full((ids.shape[0], 1), beam, dtype=np.int32))
    return [source, beams]


def _triton_type(array: np.ndarray) -> str:
    return {np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64"}[array.dtype]


def _source_ids(server_repo: Path, texts: list[str]) -> list[np.ndarray]:
    from triton_kit.python_models.nmt.text import MarianText

    text = MarianText(server_repo / "nmt" / "1", 128)
    return [np.array([text.encode(t)], dtype=np.int32) for t in texts]


def _decode(server_repo: Path, ids: np.ndarray) -> str:
    from triton_kit.python_models.nmt.text import MarianText

    return MarianText(server_repo / "nmt" / "1", 128).decode([int(i) for i in ids if i >= 0])


def test_concurrent_requests_are_batched_and_a_bad_one_fails_alone(
    server, built: Path, in_process
) -> None:
    """Requests straight to nmt_ct2, sent at once: Triton's dynamic batcher gives the backend
    several in one execute (its statistics: fewer executions than rows); among them one with
    an id outside the vocabulary and one of padding only get the backend's INVALID_ARG naming
    the problem (one of the wrong dtype, Triton's own), the good ones their translations, and
    the server stays ready."""
    texts = [corpus.english(n) for n in _held_out(8)]
    good = _source_ids(built, texts)
    bad_id = good[0].copy()
    bad_id[0, 0] = 9999
    padding = np.full((1, 3), -1, dtype=np.int32)
    bad_dtype = good[1].astype(np.int64)
    requests = [*good[:4], bad_id, *good[4:], padding, bad_dtype]
    url = server.grpc_url.removeprefix("grpc://")

    def one(ids: np.ndarray):
        client = grpcclient.InferenceServerClient(url)
        try:
            result = client.infer(CT2, _ids_request(ids), client_timeout=60)
            return _decode(built, result.as_numpy("TARGET_IDS")[0])
        except InferenceServerException as exc:
            return exc
        finally:
            client.close()

    def send_all():
        before = counts_at_rest(server.grpc_url, CT2)
        with ThreadPoolExecutor(len(requests)) as pool:
            answers = list(pool.map(one, requests))
        after = settled_counts(server.grpc_url, CT2, before, len(good))
        return answers, (after[0] - before[0], after[1] - before[1])

    executed = len(requests) - 1  # Triton refuses the INT64 one before any execute
    answers, (executions, rows) = first_co_batched(server.grpc_url, CT2, executed, send_all)
    served = answers[:4] + answers[5:-2]
    assert served == in_process(texts, 4)
    assert rows == len(good) and executions < rows
    refusals = (
        (answers[4], "SOURCE_IDS row 0 holds id 9999, not in the source vocabulary"),
        (answers[-2], "SOURCE_IDS row 0 is empty"),
        (answers[-1], "data-type is 'INT64'"),
    )
    for answer, words in refusals:
        assert isinstance(answer, InferenceServerException), answer
        assert "INVALID_ARG" in str(answer.status()) and words in answer.message(), answer
    with TritonClient(server.grpc_url, timeout=60) as triton:
        assert triton.server_ready()


def test_a_bad_row_fails_alone_through_nmt(server) -> None:
    with TritonClient(server.grpc_url, timeout=60) as triton:
        results = triton.translate(
            ["seven", "x" * 100_000, "twelve"], beam_size=2, return_exceptions=True
        )
        assert isinstance(results[1], InvalidInputError)
        assert results[0] == "sept" and results[2] == "douze"
        bad_beam = triton.translate(["seven"], beam_size=99, return_exceptions=True)
        assert isinstance(bad_beam[0], InvalidInputError)
        assert triton.server_ready()


def test_the_stub_imports_no_engine(blocked: tuple) -> None:
    """Runs last: the nmt stub has served every test above without trying to import
    ctranslate2, onnxruntime or torch, and maps no engine library; the probe shows it could
    not."""
    server, log = blocked
    with TritonClient(server.grpc_url) as triton:
        assert triton.translate("seven") == ["sept"]
    assert_blocked_and_untried(server, log, "nmt", BLOCKED)
