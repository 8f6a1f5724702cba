"""``build_engines nmt --architecture rnn --engine torch --search engine``: the recurrent
model's whole search as one TorchScript module, ``nmt_rnn_generate``, served by Triton's own
pytorch backend; ``nmt_rnn`` tokenises, calls it by BLS once per beam size of its batch, and
detokenises. The reference is a plain PyTorch beam search over the eager model
(tests/support/nmt_reference); a batch's sentences reach ``nmt_rnn_generate`` in one call
(Triton's statistics count them); a bad row fails alone."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers import MarianTokenizer

from tests.support.batching import (
    counts_at_rest,
    first_co_batched,
    settled_counts,
)
from tests.support.nmt_reference import rnn_reference_search
from tests.support.nmt_requests import rows_request
from tests.support.served_build import build_repository, serving
from triton_kit.build_engines.families.nmt import DEFAULT_RNN_CHECKPOINT, corpus
from triton_kit.build_engines.families.nmt.rnn import model as rnn_model
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT, encode
from triton_kit.client import InvalidInputError, TritonClient
from triton_kit.server import TritonServer
from triton_kit.server.model_backends import model_backends

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses"),
]
BLS, GENERATE = "nmt_rnn", "nmt_rnn_generate"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    root = tmp_path_factory.mktemp("nmt-rnn-torch-generate")
    flags = ["nmt", "--architecture", "rnn", "--engine", "torch", "--search", "engine"]
    repo, log = build_repository(root, *flags, "--instances", "1")
    return root, repo, log


@pytest.fixture(scope="module")
def engine_server(built) -> Iterator[TritonServer]:
    root, repo, _ = built
    with serving(repo, root / "log") as server:
        yield server


@pytest.fixture(scope="module")
def reference():
    model = rnn_model.load(DEFAULT_RNN_CHECKPOINT)
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))

    def translate(texts: list[str], beam: int, max_length: int = 64) -> list[str]:
        sources = encode(tokenizer, texts, False)
        ids = [rnn_reference_search(model, s, beam, max_length) for s in sources]
        return [tokenizer.decode(i, skip_special_tokens=True) for i in ids]

    return translate


def _held_out(count: int) -> list[str]:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [corpus.english(n) for n in list(split.test)[:count]]


def test_the_build_checks_and_writes_the_search_alone(built) -> None:
    """The saved module matched the Python search on every verify sentence; the repository
    holds the search and the BLS model, no step models (the search never calls them)."""
    _, repo, log = built
    device = "cuda" if torch.cuda.is_available() else "cpu"  # where the build puts it
    for beam in (1, 4):
        expected = f"{GENERATE} (fp32, {device}) vs the Python search (ONNX Runtime), beam {beam}"
        assert f"{expected}: 16/16 sentences identical" in log
    assert model_backends(repo) == {BLS: "python", GENERATE: "pytorch"}


@pytest.mark.parametrize(("beam", "max_length"), [(1, 64), (4, 64), (4, 5)])
def test_served_search_matches_the_reference(engine_server, reference, beam, max_length) -> None:
    texts = _held_out(12)
    with TritonClient(engine_server.grpc_url, timeout=60) as triton:
        served = triton.translate(texts, beam_size=beam, max_length=max_length, model=BLS)
    assert served == reference(texts, beam, max_length)
    assert len(set(served)) > 6  # real, distinct translations


def test_rows_keep_their_own_beam_and_max_length(engine_server, reference) -> None:
    """One request, rows with different beams and limits: one nmt_rnn_generate call per beam
    size, each row as the reference gives it with its own settings."""
    texts = _held_out(6)
    beams, limits = [1, 4, 1, 4, 2, 2], [64, 64, 6, 7, 64, 9]
    url = engine_server.grpc_url
    before = counts_at_rest(url, GENERATE)
    served = rows_request(url, texts, beams, limits, model=BLS)
    after = settled_counts(url, GENERATE, before, len(texts))
    expected = [reference([t], b, m)[0] for t, b, m in zip(texts, beams, limits, strict=True)]
    assert served == expected
    assert (after[0] - before[0], after[1] - before[1]) == (3, 6)  # beams 1, 2 and 4


def test_concurrent_requests_share_one_generate_call(engine_server, reference) -> None:
    """Requests the dynamic batcher gave one nmt_rnn execute reach nmt_rnn_generate together:
    its statistics count more rows than calls."""
    texts = _held_out(8)
    url = engine_server.grpc_url

    def send_all() -> tuple[list[str], tuple[int, int]]:
        before = counts_at_rest(url, GENERATE)

        def one(text: str) -> str:
            with TritonClient(url, timeout=60) as triton:
                return triton.translate([text], beam_size=4, model=BLS)[0]

        with ThreadPoolExecutor(len(texts)) as pool:
            served = list(pool.map(one, texts))
        after = settled_counts(url, GENERATE, before, len(texts))
        return served, (after[0] - before[0], after[1] - before[1])

    served, (calls, rows) = first_co_batched(url, BLS, len(texts), send_all)
    assert served == reference(texts, 4)
    assert rows == len(texts) and calls < rows


def test_a_bad_row_fails_alone(engine_server) -> None:
    with TritonClient(engine_server.grpc_url, timeout=60) as triton:
        results = triton.translate(
            ["seven", "x" * 100_000, "twelve"], beam_size=2, return_exceptions=True, model=BLS
        )
        assert isinstance(results[1], InvalidInputError) and "bytes" in str(results[1])
        assert results[0] == "sept" and results[2] == "douze"
        empty = triton.translate(["  "], return_exceptions=True, model=BLS)[0]
        assert isinstance(empty, InvalidInputError) and "TEXT is empty" in str(empty)
        assert triton.translate(["seven"], beam_size=1, model=BLS) == ["sept"]
        assert triton.server_ready()


def test_int8_dynamic_serves_the_reference_translations(tmp_path, reference) -> None:
    """``--precision int8-dynamic`` (CPU: the build refuses a visible GPU): Triton's own
    pytorch backend runs the quantized linear and GRU ops; the build's share of held-out
    sentences are the fp32 reference's (int8 may flip a near-tie)."""
    from triton_kit.build_engines.families.nmt.torch_search import MIN_AGREEMENT

    if torch.cuda.is_available():
        pytest.skip("int8-dynamic is CPU only: the build refuses where a GPU is visible")
    flags = ["nmt", "--architecture", "rnn", "--engine", "torch", "--search", "engine"]
    repo, log = build_repository(tmp_path, *flags, "--precision", "int8-dynamic")
    assert f"{GENERATE} (fp32, cpu) vs the Python search (ONNX Runtime), beam 4: 16/16" in log
    assert model_backends(repo) == {BLS: "python", GENERATE: "pytorch"}
    assert "int8-dynamic" in (repo / GENERATE / "config.pbtxt").read_text()
    texts = _held_out(24)
    with serving(repo, tmp_path / "log") as server, TritonClient(server.grpc_url) as triton:
        for beam in (1, 4):
            served = triton.translate(texts, beam_size=beam, max_length=64, model=BLS)
            same = sum(s == r for s, r in zip(served, reference(texts, beam), strict=True))
            print(f"served int8-dynamic vs the reference, beam {beam}: {same}/{len(texts)}")
            assert same >= MIN_AGREEMENT["int8-dynamic"] * len(texts), f"beam {beam}: {same}"
        assert triton.server_ready()


def test_the_nmt_rnn_stub_maps_no_engine(engine_server) -> None:
    """The recurrent search runs in Triton's pytorch backend: the ``nmt_rnn`` stub, having
    translated, has mapped neither libtorch nor ONNX Runtime's Python module (issue 31)."""
    from tests.support.engine_free import mapped_engines, stub_pids

    with TritonClient(engine_server.grpc_url, timeout=60) as triton:
        assert triton.translate(["seven"], beam_size=4, model=BLS)[0]
    pids = stub_pids(engine_server, BLS)
    assert pids and all(mapped_engines(pid) == set() for pid in pids)
