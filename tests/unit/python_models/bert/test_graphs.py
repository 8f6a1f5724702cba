"""CUDA graphs for the ``bert`` model's in-process TorchScript encoder (issue 10): the
bookkeeping (graph shapes from the sibling's config, bucket choice, padding rows up to a
graph's batch, slicing them back, chunking past the largest graph), without a model. The
encoder itself, built and traced, is checked against eager in
tests/build/python_models/bert/test_graphs_encoder.py; served, in
tests/integration/bert/test_torch_engine.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from triton_kit.build_engines.engines.torchscript import TorchConfigOptions, torch_model_config
from triton_kit.build_engines.repository import Tensor, write_model
from triton_kit.python_models.bert.torch_encoder import graph_pairs, sibling_config
from triton_kit.python_models.common.cuda_graphs import (
    batch_buckets,
    graph_shapes,
    pick,
    row_chunks,
)

NAMES = ("input_ids", "attention_mask")
LENGTHS = (16, 32, 64)


class Slot(NamedTuple):
    batch: int
    inner_shapes: dict[str, tuple[int, ...]]


def test_batch_buckets_are_powers_of_two_then_the_largest() -> None:
    assert batch_buckets(32) == (1, 2, 4, 8, 16, 32)
    assert batch_buckets(24) == (1, 2, 4, 8, 16, 24)
    assert batch_buckets(1) == (1,)
    with pytest.raises(ValueError, match="at least 1"):
        batch_buckets(0)


def test_row_chunks_cover_every_row_once() -> None:
    assert row_chunks(20, 8) == [(0, 8), (8, 16), (16, 20)]
    assert row_chunks(8, 8) == [(0, 8)]
    assert row_chunks(0, 8) == []
    with pytest.raises(ValueError):
        row_chunks(3, 0)


def test_pick_takes_the_smallest_graph_that_holds_the_rows() -> None:
    short, long = {"ids": (16,)}, {"ids": (32,)}
    slots = [Slot(8, short), Slot(2, short), Slot(4, short), Slot(32, long)]
    assert pick(slots, short, 1) == Slot(2, short)
    assert pick(slots, short, 3) == Slot(4, short)
    assert pick(slots, short, 8) == Slot(8, short)
    assert pick(slots, short, 9) is None, "more rows than any graph of that shape"
    assert pick(slots, {"ids": (48,)}, 1) is None, "no graph of that shape"
    assert pick(slots, {"ids": np.zeros((5, 32)).shape[1:]}, 5) == Slot(32, long)


def test_default_grid_is_every_batch_bucket_at_every_length_largest_first() -> None:
    pairs = graph_pairs(None, 8, LENGTHS)
    assert sorted(pairs) == sorted((b, n) for b in (1, 2, 4, 8) for n in LENGTHS)
    assert pairs[0] == (8, 64) and pairs[-1] == (1, 16)
    assert graph_pairs({"optimization": {"cuda": {"graphs": False}}}, 2, (16,)) == [
        (2, 16),
        (1, 16),
    ]


def test_graph_spec_of_the_sibling_is_honoured() -> None:
    spec = [
        {"batch_size": 4, "input": {"input_ids": {"dim": ["32"]}}},
        {"batch_size": 16},  # no dims: every sequence bucket
        {"batch_size": 2, "input": {"input_ids": {"dim": ["40"]}}},  # not a bucket: dropped
    ]
    config = {"optimization": {"cuda": {"graphs": True, "graph_spec": spec}}}
    assert graph_pairs(config, 32, LENGTHS) == [(16, 64), (16, 32), (4, 32), (16, 16)]


def test_sibling_config_reads_the_graph_spec_the_torch_engine_writes(tmp_path: Path) -> None:
    options = TorchConfigOptions(
        max_batch_size=32,
        gpu=True,
        graph_batch_sizes=(4, 8),
        graph_dims={"input_ids": (32,), "attention_mask": (32,)},
    )
    inputs = [Tensor(name, "INT64", (-1,)) for name in NAMES]
    config = torch_model_config("bert_model", inputs, [Tensor("EMBEDDING", "FP32", (8,))], options)
    write_model(tmp_path, config, {})
    (tmp_path / "bert" / "1").mkdir(parents=True)
    read = sibling_config(tmp_path / "bert" / "1", "bert_model")
    assert read is not None
    assert graph_pairs(read, 32, LENGTHS) == [(8, 32), (4, 32)]
    assert [s["input_ids"] for s in graph_shapes(read)] == [(4, 32), (8, 32)], "the backend's view"
    assert sibling_config(tmp_path / "bert" / "1", "no_such_model") is None
