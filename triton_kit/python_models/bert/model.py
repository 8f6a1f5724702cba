"""The ``bert`` model: text in, sentence embedding out, in ONE python model.

Why not an ensemble of a tokenizer and the encoder: every hop between Triton
models costs a python-backend IPC round trip and a scheduler pass (about 3 ms at
concurrency 1 on 2 CPU cores, measured in benchmarks/results/bert.md), more than a short
text's encoder compute. Here one execute call tokenises every queued request,
groups all their texts by length bucket and runs one encoder call per bucket,
which also batches texts of different requests that Triton's dynamic batcher
could not group (it only groups equal shapes).

The encoder is the ONNX file that the sibling ``encoder_model`` (``bert_model``)
serves, run in-process by ONNX Runtime; the repository holds it once. Built with
``--engine torch``, the sibling holds TorchScript ``model.pt`` instead, run in-process
by torch on the sibling's device (:mod:`triton_kit.python_models.bert.torch_encoder`). When
that model serves neither (a TensorRT plan on a GPU host), or torch is missing from the
stub's environment (the official container), the encoder is called through BLS, so one
repository works on all of them.

On a GPU the TorchScript encoder can replay one CUDA graph per (batch bucket, sequence
bucket) (:mod:`triton_kit.python_models.bert.torch_encoder`): when the sibling's config says
``optimization { cuda { graphs: true ... } }`` (Triton's own field) or this model's
``cuda_graphs`` parameter is true. Off by default: this path has not yet run on a GPU.

Parameters: those of :class:`triton_kit.python_models.bert.text.BertTokenizerModel`, plus
``encoder_model``, ``intra_op_thread_count`` (threads of the in-process session) and
``cuda_graphs`` (default false).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from triton_kit.python_models.bert.text import BertTokenizerModel, group_by_bucket, pad_rows
from triton_kit.python_models.common import bls
from triton_kit.python_models.common.base import Arrays
from triton_kit.python_models.common.ort_session import SessionSettings, create_session
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.common.sibling import sibling_onnx

Encoder = Callable[[Arrays], np.ndarray]


def _torch_imports() -> bool:
    """The official container's python backend has no torch: BLS to the native backend then."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def encoder_session_settings(params: ModelParameters) -> SessionSettings:
    """The in-stub encoder's session, from the model's parameters as the native backend reads
    them (threads, ``session.*`` entries); one intra- and one inter-op thread where a config
    built before says nothing. The build gives this one stub the whole thread budget with
    ONNX Runtime's default spinning (triton_kit/build_engines/families/bert.py
    ``embedding_topology`` says why)."""
    values = {"intra_op_thread_count": "1", "inter_op_thread_count": "1", **params.as_dict()}
    return SessionSettings.from_parameters(values)


class BertEmbeddingModel(BertTokenizerModel):
    """TEXT (BYTES [1]) -> EMBEDDING (FP32 [hidden]); tokenizer and encoder in one stub."""

    def setup(self) -> None:
        super().setup()
        self.output_name = next(iter(self.output_dtypes))
        encoder_model = self.params.str("encoder_model")
        threads = self.params.int("intra_op_thread_count", 1)
        path = sibling_onnx(self.version_dir, encoder_model)
        script = sibling_onnx(self.version_dir, encoder_model, "model.pt")
        if path is not None:
            settings = encoder_session_settings(self.params)
            self.encoder = self._session_encoder(create_session(path, settings))
        elif script is not None and _torch_imports():
            self.encoder = self._torch_encoder(encoder_model, script, threads)
        else:
            self.encoder = self._bls_encoder(encoder_model)
            self.logger.info("%s: encoder via BLS to %s", self.model_name, encoder_model)

    def _session_encoder(self, ort_session) -> Encoder:
        return lambda feeds: ort_session.run([self.output_name], feeds)[0]

    def _torch_encoder(self, model: str, script, threads: int) -> Encoder:
        from triton_kit.python_models.bert.torch_encoder import torch_encoder
        from triton_kit.python_models.common.sibling import sibling_device

        device = sibling_device(self.version_dir, model)
        graphs = self._graph_pairs(model) if device == "cuda" else []
        start = time.perf_counter()
        encoder = torch_encoder(script, device, ("input_ids", "attention_mask"), threads, graphs)
        self.logger.info(
            "%s: encoder %s in-process on %s; %d CUDA graphs (batch, length) in %.1f s: %s",
            self.model_name, script, device, len(graphs), time.perf_counter() - start, graphs,
        )  # fmt: skip
        return encoder

    def _graph_pairs(self, model: str) -> list[tuple[int, int]]:
        """Graph shapes from the sibling's ``optimization.cuda`` (or the default grid), when
        the sibling asks for graphs or ``cuda_graphs: true`` is among this model's parameters."""
        from triton_kit.python_models.bert.torch_encoder import graph_pairs, sibling_config
        from triton_kit.python_models.common.cuda_graphs import graphs_enabled

        try:
            config = sibling_config(self.version_dir, model)
        except (ImportError, TypeError) as exc:  # no (or a mismatched) protobuf/tritonclient
            self.logger.warning("%s: cannot read %s's graph_spec (%s)", self.model_name, model, exc)
            config = None
        wanted = self.params.bool("cuda_graphs", False) or bool(config and graphs_enabled(config))
        if not wanted:
            return []
        return graph_pairs(config, max(self.max_batch_size, 1), self.buckets)

    def _bls_encoder(self, model: str) -> Encoder:
        return lambda feeds: bls.infer(model, feeds, [self.output_name])[0]

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
        """One encoder call per length bucket; embeddings in the order of ``rows``."""
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        out: np.ndarray | None = None
        for bucket, indices in group_by_bucket(rows, self.buckets).items():
            start = time.perf_counter()
            values = self.encoder(pad_rows([rows[i] for i in indices], bucket))
            self.timed(f"encoder_{getattr(self.encoder, 'mode', 'run')}", start)
            if out is None:
                out = np.empty((len(rows), values.shape[1]), dtype=values.dtype)
            out[indices] = values
        assert out is not None
        return out
