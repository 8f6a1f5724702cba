"""``build_engines nmt --search engine``: the whole search inside ONNX Runtime translates as
Hugging Face ``generate`` does when served. The ``nmt`` model runs the graph in its stub;
Triton's own onnxruntime backend must load the same file as ``nmt_generate`` (the start
fails otherwise), which is how the container would serve it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.nmt_reference import hf_generate
from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.client import InvalidInputError, TritonClient
from triton_kit.server import ServerConfig, TritonServer
from triton_kit.server.model_backends import model_backends


@pytest.fixture(scope="module")
def engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    root = tmp_path_factory.mktemp("nmt-engine")
    repo = root / "repo"
    build = [sys.executable, "-m", "triton_kit.build_engines", "nmt", "--search", "engine"]
    build += ["--output-repository", str(repo), "--work-dir", str(root / "work")]
    done = subprocess.run(build, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert model_backends(repo)["nmt_generate"] == "onnxruntime"
    config = ServerConfig(
        model_repository=repo, http_port=0, grpc_port=0, metrics_port=0, log_file=root / "log"
    )
    with TritonServer(config) as server:
        yield server


def _reference(texts: list[str], beam: int, max_length: int) -> list[str]:
    from transformers import MarianMTModel, MarianTokenizer

    model = MarianMTModel.from_pretrained(str(DEFAULT_CHECKPOINT))
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    penalty = model.generation_config.length_penalty or 1.0  # HF's default when unset
    ids = hf_generate(model, tokenizer, texts, beam, max_length, penalty)
    return tokenizer.batch_decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("beam", [1, 4])
def test_served_graph_matches_hf_generate(engine_server: TritonServer, beam: int) -> None:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    texts = [corpus.english(n) for n in list(split.test)[:12]]
    with TritonClient(engine_server.grpc_url) as triton:
        served = triton.translate(texts, beam_size=beam, max_length=64)
    assert served == _reference(texts, beam, 64)


def test_a_bad_request_fails_alone(engine_server: TritonServer) -> None:
    with TritonClient(engine_server.grpc_url) as triton:
        results = triton.translate(
            ["seven", "x" * 100_000, "twelve"], beam_size=2, return_exceptions=True
        )
        assert isinstance(results[1], InvalidInputError)
        assert results[0] == "sept" and results[2] == "douze"
        assert triton.server_ready()
