"""``triton_kit.python_models.bert.model`` (tokenizer here, encoder through BLS) without a server.

The tokenizer is the nine-word WordPiece of
tests/unit/python_models/bert/test_tokenizer_model.py; the encoder model answering the BLS
calls (behind tests/support/pb_utils_standin.py) returns, for each row, (sum of the ids it
attends to, tokens attended, padded length), so every expected value is read off the
vocabulary by hand: "hello world" is [CLS] hello world [SEP] = 2 + 4 + 5 + 3 = 14 over 4
tokens. The served stub against the real Triton (and a stub environment where onnxruntime
and torch cannot be imported) is tests/integration/bert/test_engine_free_stub.py.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import pb_utils_standin as standin
from tests.support.pb_utils_standin import error_of, outputs, request
from tests.unit.python_models.bert.test_tokenizer_model import write_tokenizer
from triton_kit.python_models.bert.model import BertEmbeddingModel, row_chunks
from triton_kit.python_models.common.base import PROFILE_DIR_ENV


def _numpy_encoder(feeds: dict[str, np.ndarray]) -> np.ndarray:
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    width = np.full(len(ids), ids.shape[1])
    return np.stack([(ids * mask).sum(1), mask.sum(1), width], axis=1).astype(np.float32)


def _config(max_batch_size: int = 8, **parameters: str) -> dict:
    values = {"max_length": "8", "buckets": "4,6", "encoder_model": "toy_encoder", **parameters}
    return {
        "name": "bert",
        "max_batch_size": max_batch_size,
        "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [1]}],
        "output": [{"name": "EMBEDDING", "data_type": "TYPE_FP32", "dims": [3]}],
        "parameters": {k: {"string_value": v} for k, v in values.items()},
    }


def _model(repository: Path, config: dict | None = None) -> BertEmbeddingModel:
    (repository / "bert" / "1").mkdir(parents=True, exist_ok=True)
    write_tokenizer(repository / "bert" / "1" / "tokenizer.json")
    model = BertEmbeddingModel()
    model.initialize(
        {
            "model_config": json.dumps(config or _config()),
            "model_name": "bert",
            "model_repository": str(repository / "bert"),
            "model_version": "1",
        }
    )
    return model


@pytest.fixture
def pb_utils(monkeypatch):
    monkeypatch.delenv(PROFILE_DIR_ENV, raising=False)
    return standin.install(
        monkeypatch, "triton_kit.python_models.common.base", "triton_kit.python_models.common.bls"
    )


@pytest.fixture
def calls(pb_utils) -> list[tuple[str, list[str], list[int]]]:
    """Every BLS call the model makes: (model, outputs asked for, input_ids shape)."""
    seen: list[tuple[str, list[str], list[int]]] = []

    def encoder_model(model: str, feeds, names):
        seen.append((model, names, list(feeds["input_ids"].shape)))
        tensor = pb_utils.Tensor("EMBEDDING", _numpy_encoder(feeds))
        return pb_utils.InferenceResponse(output_tensors=[tensor])

    pb_utils.bls_handler = encoder_model
    return seen


def _texts(*items: object) -> dict[str, np.ndarray]:
    return {"TEXT": np.array([[item] for item in items], dtype=np.object_)}


def test_each_request_is_embedded_through_bls_with_bad_ones_failing_alone(
    tmp_path: Path, calls
) -> None:
    model = _model(tmp_path)
    assert model.output_name == "EMBEDDING"
    responses = model.execute(
        [
            request(_texts(b"hello world")),  # 2 4 5 3: bucket 4
            request(_texts(b"  ")),
            request(_texts(b"the cat", b"the cats the cats world")),  # bucket 4; 9 -> 8 tokens
            request(_texts(b"hello")),  # 2 4 3: bucket 4, padded
            request(_texts(b"\xff")),
        ]
    )
    assert outputs(responses[0])["EMBEDDING"].tolist() == [[14.0, 4.0, 4.0]]
    assert error_of(responses[1]) == (
        3,
        "TEXT is whitespace only; send at least one non-space character",
    )
    # "the cats the cats world" truncates to [CLS] the cat ##s the cat ##s [SEP]
    assert outputs(responses[2])["EMBEDDING"].tolist() == [
        [2.0 + 6 + 7 + 3, 4.0, 4.0],
        [2.0 + 6 + 7 + 8 + 6 + 7 + 8 + 3, 8.0, 8.0],
    ]
    assert outputs(responses[3])["EMBEDDING"].tolist() == [[9.0, 3.0, 4.0]]
    assert error_of(responses[4])[0] == 3
    assert outputs(responses[0])["EMBEDDING"].dtype == np.float32
    # One BLS call per bucket for the whole execute: 3 rows of bucket 4, 1 of bucket 8.
    assert calls == [("toy_encoder", ["EMBEDDING"], [3, 4]), ("toy_encoder", ["EMBEDDING"], [1, 8])]


def test_the_siblings_engine_files_are_not_opened(tmp_path: Path, calls, caplog) -> None:
    """An ONNX file and a TorchScript file beside the encoder model (what the builds write)
    are Triton's backends' to load: the stub calls the model, whatever it serves."""
    version = tmp_path / "toy_encoder" / "1"
    version.mkdir(parents=True)
    (version / "model.onnx").write_bytes(b"not an onnx graph")  # opening it would fail
    (version / "model.pt").write_bytes(b"not a torchscript archive")
    with caplog.at_level(logging.INFO, logger="python_models"):
        model = _model(tmp_path)
    assert "bert: encoder via BLS to toy_encoder" in [r.getMessage() for r in caplog.records]
    responses = model.execute([request(_texts(b"hello world", b"the cats the cats world"))])
    assert outputs(responses[0])["EMBEDDING"].tolist() == [[14.0, 4.0, 4.0], [47.0, 8.0, 8.0]]
    assert calls == [("toy_encoder", ["EMBEDDING"], [1, 4]), ("toy_encoder", ["EMBEDDING"], [1, 8])]


def test_neither_onnxruntime_nor_torch_is_needed(tmp_path: Path, calls, monkeypatch) -> None:
    """The container's python backend need not carry an engine library for ``bert``."""
    for name in ("onnxruntime", "torch"):
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now raises ImportError
    (tmp_path / "toy_encoder" / "1").mkdir(parents=True)
    (tmp_path / "toy_encoder" / "1" / "model.onnx").write_bytes(b"x")
    model = _model(tmp_path)
    responses = model.execute([request(_texts(b"hello"))])
    assert outputs(responses[0])["EMBEDDING"].tolist() == [[9.0, 3.0, 4.0]]


def test_a_bucket_above_the_encoders_batch_limit_is_split(tmp_path: Path, calls) -> None:
    model = _model(tmp_path, _config(encoder_max_batch_size="2"))
    texts = [b"hello", b"cat", b"world", b"hello world", b"the cats the cats world"]
    responses = model.execute([request(_texts(*texts))])
    assert outputs(responses[0])["EMBEDDING"].tolist() == [
        [9.0, 3.0, 4.0],  # [CLS] hello [SEP]
        [12.0, 3.0, 4.0],  # [CLS] cat [SEP]
        [10.0, 3.0, 4.0],  # [CLS] world [SEP]
        [14.0, 4.0, 4.0],
        [47.0, 8.0, 8.0],
    ]
    shapes = [shape for _, _, shape in calls]
    assert shapes == [[2, 4], [2, 4], [1, 8]]  # bucket 4's 4 rows in twos, bucket 8 alone


def test_the_batch_limit_defaults_to_the_models_own(tmp_path: Path, calls) -> None:
    model = _model(tmp_path, _config(max_batch_size=3))
    assert model.encoder_rows == 3
    model.execute([request(_texts(b"hello", b"cat", b"world", b"the"))])
    assert [shape for _, _, shape in calls] == [[3, 4], [1, 4]]


def test_row_chunks() -> None:
    assert row_chunks([5, 1, 7, 2, 9], 2) == [[5, 1], [7, 2], [9]]
    assert row_chunks([5, 1, 7], 3) == [[5, 1, 7]]
    assert row_chunks([5, 1, 7], 0) == [[5, 1, 7]]  # unbatched encoder config: no limit here


def test_an_execute_of_only_bad_requests_runs_no_encoder(tmp_path: Path, calls) -> None:
    model = _model(tmp_path)
    responses = model.execute([request(_texts(b"")), request({"TEXT": np.zeros((0, 1), object)})])
    assert error_of(responses[0]) == (3, "TEXT is empty; send at least one non-space character")
    assert error_of(responses[1]) == (3, "TEXT has no elements")
    empty = model.embed([])
    assert empty.shape == (0, 0) and empty.dtype == np.float32
    assert calls == []


def test_embed_keeps_row_order_across_buckets(tmp_path: Path, calls) -> None:
    model = _model(tmp_path)
    rows = [[2, 4, 5, 6, 7, 3], [2, 4, 3], [2, 8, 8, 8, 8, 8, 8, 3], [2, 5, 3]]
    assert model.embed(rows).dtype == np.float32
    assert model.embed(rows).tolist() == [
        [27.0, 6.0, 6.0],
        [9.0, 3.0, 4.0],
        [53.0, 8.0, 8.0],
        [10.0, 3.0, 4.0],
    ]


def test_a_failing_encoder_fails_the_good_requests_but_not_the_bad_ones(
    tmp_path: Path, pb_utils
) -> None:
    def broken(model: str, feeds, names):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError("no instance"))

    pb_utils.bls_handler = broken
    model = _model(tmp_path)  # no toy_encoder directory at all
    responses = model.execute(
        [request(_texts(b"hello")), request(_texts(b" ")), request(_texts(b"cat"))]
    )
    assert error_of(responses[0]) == (1, "RuntimeError: toy_encoder: no instance")
    # The bad request is told what is wrong with it, not about the encoder.
    assert error_of(responses[1]) == (
        3,
        "TEXT is whitespace only; send at least one non-space character",
    )
    assert error_of(responses[2]) == (1, "RuntimeError: toy_encoder: no instance")


def test_profiling_names_the_encoder_phase(tmp_path: Path, calls, monkeypatch) -> None:
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path))
    model = _model(tmp_path)
    model.execute([request(_texts(b"hello", b"the cats the cats world"))])
    assert sorted(model.profile.seconds) == [
        "encoder_bls",
        "execute",
        "process_batch",
        "read_inputs",
        "responses",
    ]
