"""The ``bert`` model: text in, sentence embedding out; Python tokenises, Triton's backend encodes.

Why one python model in front of the encoder rather than an ensemble of a tokenizer and
the encoder: Triton's dynamic batcher only groups requests of equal shape, and texts of
different lengths tokenise to different shapes. Here one execute call tokenises every
queued request, groups all their texts by length bucket, pads each group and sends it to
the encoder model (``encoder_model``, the build's ``bert_model``) as ONE BLS call per
bucket, so texts of different requests batch together where the ensemble could not group
them.

The encoder itself runs only where Triton serves it: ``bert_model`` is Triton's own
onnxruntime backend (``--engine onnxruntime``, the default), its pytorch backend
(``--engine torch``) or a TensorRT plan on a GPU host. This stub holds no engine: it
imports neither onnxruntime nor torch, the engine is loaded once (by its backend), and
the python backend's environment needs only the tokenizer (docker/requirements-triton.txt).

Parameters: those of :class:`triton_kit.python_models.bert.text.BertTokenizerModel`, plus
``encoder_model`` (the model called through BLS) and ``encoder_max_batch_size`` (rows per
BLS call at most; default this model's own ``max_batch_size``, which the build gives both).
"""

from __future__ import annotations

import time

import numpy as np

from triton_kit.python_models.bert.text import BertTokenizerModel, group_by_bucket, pad_rows
from triton_kit.python_models.common import bls
from triton_kit.python_models.common.base import Arrays


def row_chunks(indices: list[int], limit: int) -> list[list[int]]:
    """``indices`` in slices of at most ``limit`` (all at once where ``limit`` < 1)."""
    if limit < 1:
        return [indices]
    return [indices[start : start + limit] for start in range(0, len(indices), limit)]


class BertEmbeddingModel(BertTokenizerModel):
    """TEXT (BYTES [1]) -> EMBEDDING (FP32 [hidden]); tokenizer here, encoder through BLS."""

    def setup(self) -> None:
        super().setup()
        self.output_name = next(iter(self.output_dtypes))
        self.encoder_model = self.params.str("encoder_model")
        self.encoder_rows = self.params.int("encoder_max_batch_size", self.max_batch_size)
        self.logger.info("%s: encoder via BLS to %s", self.model_name, self.encoder_model)

    def encode(self, feeds: Arrays) -> np.ndarray:
        """One padded bucket through the encoder model Triton serves."""
        return bls.infer(self.encoder_model, feeds, [self.output_name])[0]

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        per_request = self.rows_per_request(batch)
        rows = [row for item in per_request if isinstance(item, list) for row in item]
        try:
            embeddings = self.embed(rows)
        except Exception as exc:  # the encoder's failure is the good requests' only
            failure = self._note(exc)
            return [item if isinstance(item, Exception) else failure for item in per_request]
        results: list[Arrays | Exception] = []
        start = 0
        for item in per_request:
            if isinstance(item, Exception):
                results.append(item)
                continue
            results.append({self.output_name: embeddings[start : start + len(item)]})
            start += len(item)
        return results

    def embed(self, rows: list[list[int]]) -> np.ndarray:
        """One encoder call per length bucket (split only above ``encoder_max_batch_size``
        rows); embeddings in the order of ``rows``."""
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        out: np.ndarray | None = None
        for bucket, indices in group_by_bucket(rows, self.buckets).items():
            for chunk in row_chunks(indices, self.encoder_rows):
                start = time.perf_counter()
                values = self.encode(pad_rows([rows[i] for i in chunk], bucket))
                self.timed("encoder_bls", start)
                if out is None:
                    out = np.empty((len(rows), values.shape[1]), dtype=values.dtype)
                out[chunk] = values
        assert out is not None
        return out
