"""``build_engines nmt --engine torch --search engine``: the whole search as one TorchScript
module, ``nmt_generate``, served by Triton's own pytorch backend; the ``nmt`` model tokenises,
calls it by BLS once per beam size of its batch, and detokenises. Translations are Hugging
Face ``generate``'s; a batch's sentences reach ``nmt_generate`` in one call (Triton's
statistics count them); a bad row fails alone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.support.batching import (
    counts_at_rest,
    execution_count,
    first_co_batched,
    settled_counts,
)
from tests.support.nmt_reference import hf_translator
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


@contextlib.contextmanager
def _server(root, precision: str) -> Iterator[TritonServer]:
    flags = ["nmt", "--engine", "torch", "--search", "engine", "--instances", "1"]
    repo, log = build_repository(root, *flags, "--precision", precision)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # where the build puts it
    assert f"nmt_generate (fp32, {device}) vs HF generate, beam 4: 16/16" in log
    assert model_backends(repo)["nmt_generate"] == "pytorch"
    with serving(repo, root / "log") as server:
        yield server


@pytest.fixture(scope="module")
def engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with _server(tmp_path_factory.mktemp("nmt-torch-generate"), "fp32") as server:
        yield server


@pytest.mark.gpu
def test_half_precision_on_the_gpu_serves_hf_translations(tmp_path, reference) -> None:
    """fp16 on CUDA, as Triton's pytorch backend runs the saved file (simple executor): with
    the export's decoder step it answered EOS or ',' for every held-out sentence on the H100.
    Half precision may flip a near-tie against HF's fp32, so most, not all, must be HF's."""
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    texts = _held_out(24)
    with _server(tmp_path, "fp16") as server, TritonClient(server.grpc_url) as triton:
        for beam in (1, 4):
            served = triton.translate(texts, beam_size=beam, max_length=64)
            same = sum(s == r for s, r in zip(served, reference(texts, beam, 64), strict=True))
            assert same >= 0.9 * len(texts), f"beam {beam}: {same}/{len(texts)} as HF"


@pytest.fixture(scope="module")
def reference():
    return hf_translator(DEFAULT_CHECKPOINT)


def _held_out(count: int) -> list[str]:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [corpus.english(n) for n in list(split.test)[:count]]


@pytest.mark.parametrize(("beam", "max_length"), [(1, 64), (4, 64), (4, 5)])
def test_served_search_matches_hf_generate(engine_server, reference, beam, max_length) -> None:
    texts = _held_out(12)
    with TritonClient(engine_server.grpc_url, timeout=60) as triton:
        served = triton.translate(texts, beam_size=beam, max_length=max_length)
    assert served == reference(texts, beam, max_length)
    assert len(set(served)) > 6  # real, distinct translations


def test_rows_keep_their_own_beam_and_max_length(engine_server, reference) -> None:
    """One request, rows with different beams and limits: one nmt_generate call per beam
    size, each row as HF gives it with its own settings."""
    texts = _held_out(6)
    beams, limits = [1, 4, 1, 4, 2, 2], [64, 64, 6, 7, 64, 9]
    url = engine_server.grpc_url
    before = counts_at_rest(url, "nmt_generate")
    served = rows_request(url, texts, beams, limits)
    after = settled_counts(url, "nmt_generate", before, len(texts))
    expected = [reference([t], b, m)[0] for t, b, m in zip(texts, beams, limits, strict=True)]
    assert served == expected
    assert after[0] - before[0] == 3  # beams 1, 2 and 4
    assert after[1] - before[1] == 6


def test_concurrent_requests_share_one_generate_call(engine_server, reference) -> None:
    """Requests the dynamic batcher gave one nmt execute reach nmt_generate together: its
    statistics count more rows than calls."""
    texts = _held_out(8)
    url = engine_server.grpc_url

    def send_all() -> tuple[list[str], tuple[int, int]]:
        before = counts_at_rest(url, "nmt_generate")

        def one(text: str) -> str:
            with TritonClient(url, timeout=60) as triton:
                return triton.translate([text], beam_size=4)[0]

        with ThreadPoolExecutor(len(texts)) as pool:
            served = list(pool.map(one, texts))
        after = settled_counts(url, "nmt_generate", before, len(texts))
        return served, (after[0] - before[0], after[1] - before[1])

    served, (calls, rows) = first_co_batched(url, "nmt", len(texts), send_all)
    assert served == reference(texts, 4)
    assert rows == len(texts) and calls < rows


def test_the_step_models_are_not_called(engine_server) -> None:
    url = engine_server.grpc_url
    before = {m: execution_count(url, m) for m in ("nmt_generate", "nmt_encoder", "nmt_decoder")}
    with TritonClient(url, timeout=60) as triton:
        triton.translate(_held_out(2), beam_size=4)
    after = {m: execution_count(url, m) for m in before}
    assert after["nmt_generate"] > before["nmt_generate"]
    assert after["nmt_encoder"] == before["nmt_encoder"]
    assert after["nmt_decoder"] == before["nmt_decoder"]


def test_a_bad_request_fails_alone(engine_server) -> None:
    with TritonClient(engine_server.grpc_url, timeout=60) as triton:
        results = triton.translate(
            ["seven", "x" * 100_000, "twelve"], beam_size=2, return_exceptions=True
        )
        assert isinstance(results[1], InvalidInputError)
        assert results[0] == "sept" and results[2] == "douze"
        bad_beam = triton.translate(["seven"], beam_size=99, return_exceptions=True)
        assert isinstance(bad_beam[0], InvalidInputError)
        assert triton.translate(["seven"], beam_size=1) == ["sept"]
        assert triton.server_ready()


def test_int8_dynamic_serves_hf_translations(tmp_path, reference) -> None:
    """``--precision int8-dynamic`` (CPU: the build refuses a visible GPU): Triton's own
    pytorch backend runs the quantized ops; the repository holds the search and ``nmt`` only;
    the build's share of held-out sentences are HF's (int8 may flip a near-tie)."""
    from triton_kit.build_engines.families.nmt.torch_search import MIN_AGREEMENT

    if torch.cuda.is_available():
        pytest.skip("int8-dynamic is CPU only: the build refuses where a GPU is visible")
    texts = _held_out(24)
    with _server(tmp_path, "int8-dynamic") as server, TritonClient(server.grpc_url) as triton:
        assert model_backends(tmp_path / "repo") == {"nmt": "python", "nmt_generate": "pytorch"}
        config = (tmp_path / "repo" / "nmt_generate" / "config.pbtxt").read_text()
        assert "int8-dynamic" in config and "KIND_CPU" in config
        for beam in (1, 4):
            served = triton.translate(texts, beam_size=beam, max_length=64)
            same = sum(s == r for s, r in zip(served, reference(texts, beam, 64), strict=True))
            print(f"served int8-dynamic vs HF, beam {beam}: {same}/{len(texts)}")
            assert same >= MIN_AGREEMENT["int8-dynamic"] * len(texts), f"beam {beam}: {same}"
        assert triton.server_ready()


def test_the_nmt_stub_maps_no_engine(engine_server) -> None:
    """The search runs in Triton's pytorch backend: the ``nmt`` stub, having translated, has
    mapped neither libtorch nor ONNX Runtime's Python module (issue 31)."""
    from tests.support.engine_free import mapped_engines, stub_pids

    with TritonClient(engine_server.grpc_url, timeout=60) as triton:
        assert triton.translate(["seven"], beam_size=4) == ["sept"]
    pids = stub_pids(engine_server, "nmt")
    assert pids and all(mapped_engines(pid) == set() for pid in pids)
