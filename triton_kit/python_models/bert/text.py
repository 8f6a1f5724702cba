"""BERT tokenization with length buckets: pure functions plus the Triton model.

Why buckets: Triton's dynamic batcher only groups requests whose tensors have
equal shapes. Padding every text to one of a few lengths (16/32/48/64/96/...) lets
texts of similar length batch together, while wasting far less compute than
padding everything to the maximum length.

The functions are the single definition of tokenization: the ``bert_preprocess``
model calls them, and tests and benchmarks call them in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.python_models.common.base import Arrays, InvalidInput, PythonModel
from triton_kit.python_models.common.contracts import DEFAULT_MAX_TEXT_BYTES

# Steps of 16 then 32 tokens: on CPU the cost is about linear in the padded length, so
# finer buckets waste less; each extra bucket only splits the dynamic batcher's groups.
DEFAULT_BUCKETS = (16, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)


@dataclass(frozen=True)
class TextLimits:
    """What the tokenizer accepts; the reason for each rejection is sent to the client."""

    max_bytes: int = DEFAULT_MAX_TEXT_BYTES
    allow_empty: bool = False


def load_tokenizer(path: Path | str, max_length: int) -> Any:
    """A ``tokenizers.Tokenizer`` from tokenizer.json: truncate to max_length, no padding.

    Padding stored in tokenizer.json (all-MiniLM's pads to 128) is switched off:
    :func:`pad_to_buckets` decides the padded length.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def bucket_lengths(buckets: Sequence[int], max_length: int) -> tuple[int, ...]:
    """Sorted buckets up to ``max_length``, which is always the last (so every text fits)."""
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2 (for [CLS] and [SEP]), got {max_length}")
    kept = sorted({b for b in buckets if 0 < b < max_length})
    return (*kept, max_length)


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket holding ``length`` tokens (buckets sorted, last = max length)."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    raise ValueError(f"{length} tokens exceed the largest bucket {buckets[-1]}")


def decode_text(item: object, limits: TextLimits = TextLimits()) -> str:
    """UTF-8 bytes (or str) to str, rejecting what cannot give a meaningful embedding."""
    data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
    if len(data) > limits.max_bytes:
        raise InvalidInput(
            f"TEXT is {len(data)} bytes; the limit is {limits.max_bytes} bytes "
            "(texts are truncated to the model's maximum tokens anyway: send less)"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"TEXT is not valid UTF-8: byte {exc.start} ({data[exc.start : exc.start + 1]!r}) "
            f"{exc.reason}"
        ) from exc
    if not limits.allow_empty and not text.strip():
        kind = "empty" if not text else "whitespace only"
        raise InvalidInput(f"TEXT is {kind}; send at least one non-space character")
    return text


def token_ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids per text ([CLS] ... [SEP], truncated), in one parallel batch call."""
    return [encoding.ids for encoding in tokenizer.encode_batch(list(texts))]


def pad_rows(rows: Sequence[Sequence[int]], length: int) -> Arrays:
    """``input_ids`` and ``attention_mask`` (INT64 [n, length]), padded with id 0 on the right."""
    ids = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros((len(rows), length), dtype=np.int64)
    for row, tokens in enumerate(rows):
        ids[row, : len(tokens)] = tokens
        mask[row, : len(tokens)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def pad_to_bucket(rows: Sequence[Sequence[int]], buckets: Sequence[int]) -> Arrays:
    """Pad rows together to the bucket of the longest one."""
    return pad_rows(rows, bucket_for(max(len(r) for r in rows), buckets))


def group_by_bucket(rows: Sequence[Sequence[int]], buckets: Sequence[int]) -> dict[int, list[int]]:
    """Row indices per bucket, so each bucket runs as one padded batch."""
    groups: dict[int, list[int]] = {}
    for index, tokens in enumerate(rows):
        groups.setdefault(bucket_for(len(tokens), buckets), []).append(index)
    return groups


def tokenize(
    tokenizer: Any, texts: Sequence[str], buckets: Sequence[int]
) -> list[tuple[list[int], Arrays]]:
    """Texts to ``[(row indices, feeds)]``, one entry per bucket: the in-process pipeline."""
    rows = token_ids(tokenizer, texts)
    return [
        (indices, pad_rows([rows[i] for i in indices], bucket))
        for bucket, indices in sorted(group_by_bucket(rows, buckets).items())
    ]


class BertTokenizerModel(PythonModel):
    """TEXT (BYTES [1]) -> input_ids, attention_mask (INT64 [bucket]).

    All texts of one execute call are tokenized in one ``encode_batch`` call;
    each request is padded on its own to its bucket. Parameters: ``tokenizer_file``
    (beside model.py), ``max_length``, ``buckets`` (comma-separated),
    ``max_text_bytes``, ``allow_empty``.
    """

    def setup(self) -> None:
        self.max_length = self.params.int("max_length")
        self.buckets = bucket_lengths(
            self.params.int_list("buckets", list(DEFAULT_BUCKETS)), self.max_length
        )
        self.limits = TextLimits(
            max_bytes=self.params.int("max_text_bytes", DEFAULT_MAX_TEXT_BYTES),
            allow_empty=self.params.bool("allow_empty", False),
        )
        path = self.version_dir / self.params.str("tokenizer_file", "tokenizer.json")
        self.tokenizer = load_tokenizer(path, self.max_length)

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        return [
            rows if isinstance(rows, Exception) else pad_to_bucket(rows, self.buckets)
            for rows in self.rows_per_request(batch)
        ]

    def rows_per_request(self, batch: list[Arrays]) -> list[list[list[int]] | Exception]:
        """Token ids of every request's texts, from one ``encode_batch`` call for all of them."""
        texts_per_request: list[list[str] | Exception] = []
        for inputs in batch:
            try:
                items = inputs["TEXT"].reshape(-1)
                texts_per_request.append([decode_text(item, self.limits) for item in items])
            except InvalidInput as exc:
                texts_per_request.append(exc)
        flat = [t for texts in texts_per_request if isinstance(texts, list) for t in texts]
        rows = iter(token_ids(self.tokenizer, flat) if flat else [])
        results: list[list[list[int]] | Exception] = []
        for texts in texts_per_request:
            if isinstance(texts, Exception):
                results.append(texts)
            elif not texts:
                results.append(InvalidInput("TEXT has no elements"))
            else:
                results.append([next(rows) for _ in texts])
        return results
