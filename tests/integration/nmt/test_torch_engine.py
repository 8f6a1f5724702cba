"""NMT built with ``--engine torch``: the served ``nmt`` model searches on TorchScript (issue 10).

The build writes ``nmt_encoder``/``nmt_decoder`` as TorchScript (``pytorch_libtorch``, no
ONNX in the repository); the ``nmt`` BLS model then runs both in-process through torch (on
the GPU when the encoder's instance group says ``KIND_GPU``). The reference is Hugging Face
``generate`` on the checkpoint, decoded by ``MarianTokenizer``: token for token the same
text, greedy and beam 4, several sentences co-batched in one search.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.support.batching import execution_count
from tests.support.nmt_reference import hf_translator
from tests.support.served_build import build_repository, serving
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.client import InvalidInputError, TritonClient

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
SENTENCES = [corpus.english(n) for n in (7, 42, 318, 1999, 50_005, 987_654)]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torchnmt")
    return build_repository(root, "nmt", "--engine", "torch", "--instances", "1")[0]


@pytest.fixture(scope="module")
def server(repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("torchnmt-log") / "tritonserver.log"
    with serving(repository, log) as running:
        yield running.grpc_url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[TritonClient]:
    with TritonClient(server, timeout=60) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def reference():
    return hf_translator(DEFAULT_CHECKPOINT)


def test_repository_serves_torchscript_not_onnx(repository: Path) -> None:
    from triton_kit.build_engines.repository import parse

    for name in ("nmt_encoder", "nmt_decoder"):
        config = parse((repository / name / "config.pbtxt").read_text())
        assert config.platform == "pytorch_libtorch", name
        group = config.instance_group[0]
        assert group.kind == (group.KIND_GPU if torch.cuda.is_available() else group.KIND_CPU)
        assert (repository / name / "1" / "model.pt").is_file()
        assert not (repository / name / "1" / "model.onnx").exists()


@pytest.mark.parametrize("beam", [1, 4])
def test_served_translations_match_hf_generate(client: TritonClient, reference, beam) -> None:
    served = client.translate(SENTENCES, beam_size=beam)
    assert served == reference(SENTENCES, beam)
    assert len(set(served)) == len(SENTENCES)  # a real translation per sentence


def test_the_search_runs_the_steps_in_process(client: TritonClient, server: str) -> None:
    """No Triton round trip per decoder step: the step models are never called through BLS."""
    before = {m: execution_count(server, m) for m in ("nmt", "nmt_encoder", "nmt_decoder")}
    client.translate(SENTENCES[:2], beam_size=4)
    after = {m: execution_count(server, m) for m in before}
    assert after["nmt"] > before["nmt"]
    assert after["nmt_encoder"] == before["nmt_encoder"]
    assert after["nmt_decoder"] == before["nmt_decoder"]


def test_max_length_is_honoured_as_hf_does(client: TritonClient, reference) -> None:
    assert client.translate(SENTENCES[-2:], beam_size=4, max_length=5) == reference(
        SENTENCES[-2:], 4, max_length=5
    )


def test_bad_row_fails_alone_through_the_torch_search(client: TritonClient, reference) -> None:
    got = client.translate([SENTENCES[0], "  ", SENTENCES[1]], return_exceptions=True)
    assert isinstance(got[1], InvalidInputError) and "TEXT is empty" in str(got[1])
    assert [got[0], got[2]] == reference([SENTENCES[0], SENTENCES[1]], 4)
