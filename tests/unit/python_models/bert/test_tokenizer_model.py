"""The ``bert_preprocess`` model's own code (BertTokenizerModel), driven without Triton.

The tokenizer is a real ``tokenizers`` WordPiece tokenizer over a nine-word vocabulary
written here, so every expected token id is read off the vocabulary by hand, never
computed by ``triton_kit.python_models.bert.text``. setup() runs as ``initialize()`` would
call it, with a parsed parameters block (as tests/unit/python_models/resnet50/test_image.py
does for the image models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from triton_kit.python_models.bert.text import (
    BertTokenizerModel,
    TextLimits,
    bucket_for,
    bucket_lengths,
    decode_text,
    load_tokenizer,
)
from triton_kit.python_models.common.base import InvalidInput
from triton_kit.python_models.common.parameters import ModelParameters, ParameterError

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "the", "cat", "##s"]
PAD, UNK, CLS, SEP, HELLO, WORLD, THE, CAT, S = range(len(VOCAB))


def write_tokenizer(path: Path) -> Path:
    """A BERT-style tokenizer.json that, like all-MiniLM's, pads every text to 16 tokens."""
    tokenizer = Tokenizer(models.WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", CLS), ("[SEP]", SEP)]
    )
    tokenizer.enable_padding(length=16, pad_id=PAD, pad_token="[PAD]")
    tokenizer.save(str(path))
    return path


def make_model(tmp_path: Path, parameters: dict[str, str], file: str = "tokenizer.json") -> Any:
    write_tokenizer(tmp_path / file)
    model = BertTokenizerModel()
    model.params = ModelParameters(parameters)
    model.version_dir = tmp_path
    model.setup()
    return model


def text(*items: object) -> dict[str, np.ndarray]:
    """One request's TEXT as Triton hands it: an object array [n, 1] of bytes."""
    return {"TEXT": np.array([[item] for item in items], dtype=np.object_).reshape(len(items), 1)}


class CountingTokenizer:
    """The real tokenizer, counting its encode_batch calls (one per execute is the design)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.batches: list[list[str]] = []

    def encode_batch(self, texts: list[str]) -> Any:
        self.batches.append(list(texts))
        return self.tokenizer.encode_batch(texts)


def test_load_tokenizer_turns_off_stored_padding_and_truncates(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(write_tokenizer(tmp_path / "t.json"), 5)
    assert tokenizer.encode("Hello world").ids == [CLS, HELLO, WORLD, SEP]
    assert tokenizer.encode("the cats the cat hello").ids == [CLS, THE, CAT, S, SEP]
    assert load_tokenizer(tmp_path / "t.json", 4).encode("the cat hello").ids == [
        CLS,
        THE,
        CAT,
        SEP,
    ]


def test_setup_reads_every_parameter(tmp_path: Path) -> None:
    model = make_model(
        tmp_path,
        {
            "max_length": "40",
            "buckets": "32,8,64,16,8",
            "max_text_bytes": "12",
            "allow_empty": "true",
            "tokenizer_file": "vocab-9.json",
        },
        file="vocab-9.json",
    )
    assert model.max_length == 40
    assert model.buckets == (8, 16, 32, 40)
    assert model.limits == TextLimits(max_bytes=12, allow_empty=True)
    assert model.tokenizer.encode("the cat the cat the cat the cat the cat the cat").ids == [
        CLS,
        *[THE, CAT] * 6,
        SEP,
    ]


def test_setup_defaults(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "100"})
    assert model.buckets == (16, 32, 48, 64, 96, 100)
    assert model.limits == TextLimits(max_bytes=65536, allow_empty=False)
    assert model.tokenizer.encode("hello").ids == [CLS, HELLO, SEP]  # padding turned off
    with pytest.raises(ParameterError, match="max_length"):
        make_model(tmp_path, {})


def test_each_request_is_padded_to_its_own_bucket(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "8", "buckets": "4,6"})
    assert model.buckets == (4, 6, 8)
    short, two, long = model.process_batch(
        [text(b"hello"), text("hello world", b"the cat"), text(b"the cats the cats world")]
    )
    assert short["input_ids"].tolist() == [[CLS, HELLO, SEP, PAD]]
    assert short["attention_mask"].tolist() == [[1, 1, 1, 0]]
    assert two["input_ids"].tolist() == [[CLS, HELLO, WORLD, SEP], [CLS, THE, CAT, SEP]]
    assert two["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]
    # 9 tokens, truncated to max_length 8: the last bucket
    assert long["input_ids"].tolist() == [[CLS, THE, CAT, S, THE, CAT, S, SEP]]
    assert long["attention_mask"].tolist() == [[1] * 8]
    assert short["input_ids"].dtype == np.int64 and short["attention_mask"].dtype == np.int64


def test_rows_are_padded_together_to_the_longest_texts_bucket(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "16", "buckets": "4,6"})
    [feeds] = model.process_batch([text(b"cat", b"the cats world")])
    assert feeds["input_ids"].tolist() == [
        [CLS, CAT, SEP, PAD, PAD, PAD],
        [CLS, THE, CAT, S, WORLD, SEP],
    ]
    assert feeds["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6]


def test_bad_requests_fail_alone_and_the_rest_share_one_encode_batch(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "8", "buckets": "4", "max_text_bytes": "20"})
    model.tokenizer = CountingTokenizer(model.tokenizer)
    batch = [
        text(b"hello"),
        text(b"the \xff cat"),
        text(b"x" * 21),
        text(b"   "),
        {"TEXT": np.zeros((0, 1), dtype=np.object_)},
        text(b""),
        text(b"world", b"dog"),
    ]
    results = model.process_batch(batch)
    assert model.tokenizer.batches == [["hello", "world", "dog"]]
    assert results[0]["input_ids"].tolist() == [[CLS, HELLO, SEP, PAD]]
    errors = results[1:6]
    assert all(type(error) is InvalidInput for error in errors), errors
    assert str(errors[0]) == "TEXT is not valid UTF-8: byte 4 (b'\\xff') invalid start byte"
    assert str(errors[1]) == (
        "TEXT is 21 bytes; the limit is 20 bytes (texts are truncated to the model's "
        "maximum tokens anyway: send less)"
    )
    assert str(errors[2]) == "TEXT is whitespace only; send at least one non-space character"
    assert str(errors[3]) == "TEXT has no elements"
    assert str(errors[4]) == "TEXT is empty; send at least one non-space character"
    assert results[6]["input_ids"].tolist() == [[CLS, WORLD, SEP, PAD], [CLS, UNK, SEP, PAD]]
    assert results[6]["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 0]]


def test_a_batch_of_only_bad_requests_never_calls_the_tokenizer(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "8"})
    model.tokenizer = CountingTokenizer(model.tokenizer)
    results = model.rows_per_request([text(b"\xc3"), {"TEXT": np.zeros(0, dtype=np.object_)}])
    assert model.tokenizer.batches == []
    assert [type(r) for r in results] == [InvalidInput, InvalidInput]
    assert str(results[1]) == "TEXT has no elements"


def test_rows_per_request_keeps_request_order(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "8"})
    rows = model.rows_per_request([text(b"cat", b"hello"), text(b"\xff"), text(b"the world")])
    assert rows[0] == [[CLS, CAT, SEP], [CLS, HELLO, SEP]]
    assert isinstance(rows[1], InvalidInput)
    assert rows[2] == [[CLS, THE, WORLD, SEP]]


def test_allow_empty_sends_empty_and_blank_texts_through(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "8", "allow_empty": "true", "buckets": "4"})
    [empty, blank] = model.process_batch([text(b""), text(b"  ")])
    assert empty["input_ids"].tolist() == [[CLS, SEP, PAD, PAD]]
    assert blank["attention_mask"].tolist() == [[1, 1, 0, 0]]


def test_a_flat_text_tensor_is_read_too(tmp_path: Path) -> None:
    model = make_model(tmp_path, {"max_length": "8", "buckets": "4"})
    flat = {"TEXT": np.array([b"hello", b"cat"], dtype=np.object_)}
    [feeds] = model.process_batch([flat])
    assert feeds["input_ids"].tolist() == [[CLS, HELLO, SEP, PAD], [CLS, CAT, SEP, PAD]]


# ---- the pure helpers' edges (test_bert_text.py covers their ordinary cases) -----------


def test_bucket_lengths_edges() -> None:
    assert bucket_lengths([16], 2) == (2,)  # [CLS] [SEP] is the shortest useful length
    assert bucket_lengths([0, -4, 1, 16], 32) == (1, 16, 32)  # only positive buckets
    assert bucket_lengths([16, 32, 48], 32) == (16, 32)  # max_length once, last
    with pytest.raises(ValueError, match=r"^max_length must be at least 2 \(for \[CLS\]"):
        bucket_lengths([16], 1)


def test_bucket_for_names_the_largest_bucket() -> None:
    with pytest.raises(ValueError) as caught:
        bucket_for(300, (16, 32, 256))
    assert str(caught.value) == "300 tokens exceed the largest bucket 256"


def test_a_text_of_exactly_the_byte_limit_is_accepted() -> None:
    assert decode_text(b"ab" * 50, TextLimits(max_bytes=100)) == "ab" * 50
    assert decode_text("é" * 50, TextLimits(max_bytes=100)) == "é" * 50  # 2 bytes each
    with pytest.raises(InvalidInput, match="TEXT is 102 bytes; the limit is 100 bytes"):
        decode_text("é" * 51, TextLimits(max_bytes=100))
