"""The ``bert`` model's encoder as a sibling's TorchScript, run in-process.

Why: when ``bert_model`` is built with ``--engine torch`` its version folder holds
``model.pt`` instead of ``model.onnx``; running that file in the ``bert`` stub keeps the
one-model design (no Triton hop per call) on CPU and GPU alike. The device follows the
sibling's instance group (``KIND_GPU``: the GPU the build traced on), so a module traced
on the GPU is not moved to the CPU or the other way round.

On the GPU the encoder replays CUDA graphs (:mod:`triton_kit.python_models.common.cuda_graphs`,
the same class the pytorch backend uses): one per (batch bucket, sequence bucket), rows
padded up to the smallest batch bucket that holds them and sliced back. Texts are already
padded to a sequence bucket by the tokenizer, so the sequence buckets are the ``bert``
model's own; the pairs come from the sibling's ``optimization { cuda { graphs: true
graph_spec {...} } }`` when it has one, otherwise every power-of-two batch up to
``max_batch_size`` at every sequence bucket. Lengths with no graph run eagerly. Python 3.10.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.python_models.common.base import Arrays
from triton_kit.python_models.common.cuda_graphs import (
    CudaGraph,
    batch_buckets,
    cuda_options,
    graphs_enabled,
    pick,
    row_chunks,
)

Encoder = Callable[[Arrays], np.ndarray]
GraphPair = tuple[int, int]  # (batch rows, sequence length)


def _sibling_config_path(version_dir: Path, model: str) -> Path:
    return Path(version_dir).parent.parent / model / "config.pbtxt"


def sibling_config(version_dir: Path, model: str) -> dict[str, Any] | None:
    """The sibling's config.pbtxt in Triton's JSON form (proto field names), or None.

    Raises ImportError where protobuf or tritonclient's ``model_config_pb2`` is missing.
    """
    path = _sibling_config_path(version_dir, model)
    if not path.is_file():
        return None
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def graph_pairs(
    config: Mapping[str, Any] | None, max_rows: int, lengths: Sequence[int]
) -> list[GraphPair]:
    """(batch, sequence length) of every graph to capture, largest first.

    With ``graphs: true`` and ``graph_spec`` in the sibling's config: each spec's
    ``batch_size`` at its ``input_ids`` length, or at every bucket when it names none
    (lengths that are not buckets are dropped: rows are always padded to a bucket).
    Otherwise: :func:`batch_buckets` of ``max_rows`` at every bucket.
    """
    specs = cuda_options(config).get("graph_spec", []) if config and graphs_enabled(config) else []
    if not specs:
        pairs = {(batch, length) for length in lengths for batch in batch_buckets(max_rows)}
    else:
        pairs = set()
        for spec in specs:
            batch = int(spec.get("batch_size", 0)) or 1
            dims = spec.get("input", {}).get("input_ids", {}).get("dim")
            wanted = [int(dims[-1])] if dims else lengths
            pairs.update((batch, length) for length in wanted if length in lengths)
    return sorted(pairs, key=lambda pair: (-pair[1], -pair[0]))


class TorchEncoder:
    """feeds (``input_ids``, ``attention_mask``: INT64 [rows, length]) -> FP32 embeddings.

    ``graphs`` lists the (batch, length) shapes to capture; on a CPU device the same
    static buffers run eagerly (that is what the CPU tests exercise). Graphs share one
    memory pool: one execute thread owns them and ``CudaGraph.run`` reads each output
    before the next replay.
    """

    def __init__(
        self,
        path: Path,
        device: str,
        input_names: Sequence[str],
        threads: int,
        graphs: Iterable[GraphPair] = (),
    ) -> None:
        import torch

        if device == "cpu" and threads > 0:
            torch.set_num_threads(threads)
        torch.backends.cudnn.benchmark = False  # re-tunes per shape: ~1 s an execute on the H100
        self.torch = torch
        self.device = device
        self.names = tuple(input_names)
        self.module = torch.jit.load(str(path), map_location=device).eval()
        self.graphs: list[CudaGraph] = []
        self.mode = "eager"  # how the last call ran: "graph" or "eager" (execute profiles)
        pool = None
        for batch, length in graphs:  # largest first: smaller ones reuse its pool's blocks
            shapes = {name: (batch, length) for name in self.names}
            dtypes = dict.fromkeys(self.names, torch.int64)  # pad_rows' dtype
            graph = CudaGraph(self._forward, shapes, dtypes, device, pool)
            pool = pool if pool is not None else graph.pool
            self.graphs.append(graph)

    def _forward(self, inputs: Mapping[str, Any]) -> tuple[Any, ...]:
        out = self.module(*(inputs[name] for name in self.names))
        return out if isinstance(out, tuple) else (out,)

    def __call__(self, feeds: Arrays) -> np.ndarray:
        rows, length = feeds[self.names[0]].shape
        inner = {name: (length,) for name in self.names}
        largest = max((g for g in self.graphs if g.inner_shapes == inner), key=_batch, default=None)
        self.mode = "eager" if largest is None else "graph"
        if largest is None:
            return self.eager(feeds)
        parts = []
        for start, stop in row_chunks(rows, largest.batch):
            graph = pick(self.graphs, inner, stop - start)
            assert graph is not None  # the largest holds any chunk
            chunk = {name: feeds[name][start:stop] for name in self.names}
            parts.append(graph.run(chunk, stop - start)[0])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def eager(self, feeds: Arrays) -> np.ndarray:
        torch = self.torch
        with torch.inference_mode():
            inputs = {
                n: torch.from_numpy(np.ascontiguousarray(feeds[n])).to(self.device)
                for n in self.names
            }
            out = self._forward(inputs)[0]
        return out.float().cpu().numpy()


def _batch(graph: CudaGraph) -> int:
    return graph.batch


def torch_encoder(
    path: Path,
    device: str,
    input_names: Sequence[str],
    threads: int,
    graphs: Iterable[GraphPair] = (),
) -> Encoder:
    """feeds -> FP32 embeddings, through the TorchScript module at ``path`` on ``device``."""
    return TorchEncoder(path, device, input_names, threads, graphs)
