"""CUDA graphs for the ``bert`` model's in-process TorchScript encoder (issue 10).

The GPU branch's bookkeeping (graph shapes from the sibling's config, bucket choice,
padding rows up to a graph's batch, slicing them back, chunking past the largest graph)
runs on CPU here: ``CudaGraph`` on a CPU device keeps the same static buffers and runs
eagerly. The reference is the same TorchScript module run eagerly on the same feeds. The
`gpu` test captures real graphs; the served check is in tests/integration/bert/test_torch_engine.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch

from build_engines.repository import Tensor, write_model
from build_engines.torch_engine import TorchConfigOptions, torch_model_config
from python_models.bert.text import pad_rows
from python_models.bert.torch_encoder import TorchEncoder, graph_pairs, sibling_config
from python_models.common.cuda_graphs import batch_buckets, graph_shapes, pick, row_chunks

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


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT with random weights, mean-pooled and traced as the torch engine does."""
    from transformers import BertConfig, BertModel

    from build_engines.bert import mean_pooled_encoder
    from build_engines.torch_engine import script_module

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    module = mean_pooled_encoder(BertModel(config, add_pooling_layer=False))
    feeds = pad_rows([[1, 5, 7, 2], [1, 9, 2]], 16)
    example = tuple(torch.from_numpy(feeds[name]) for name in NAMES)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return script_module(
        module, example, tmp_path_factory.mktemp("tiny") / "model.pt", "fp32", device
    )


def _rows(count: int, length: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, length + 1, count)
    return [[1, *rng.integers(3, 120, size - 2).tolist(), 2] for size in sizes]


# (rows, length, graph batches used; none: eager): padded up, exact, stale rows left by a
# larger call, chunked past the largest graph (8 + 8 + 4), and a length with no graph.
CALLS = [(3, 16, {4}), (8, 16, {8}), (5, 16, {8}), (1, 32, {1}), (20, 16, {8, 4}), (2, 64, set())]


def _check(model: Path, device: str) -> None:
    eager = TorchEncoder(model, device, NAMES, 1)
    graphs = [(b, n) for n in (16, 32) for b in batch_buckets(8)]
    bucketed = TorchEncoder(model, device, NAMES, 1, graphs)
    assert len(bucketed.graphs) == len(graphs) and all(g.replays == 0 for g in bucketed.graphs)
    for seed, (count, length, batches) in enumerate(CALLS):
        feeds = pad_rows(_rows(count, length, seed), length)
        before = {id(g): g.replays for g in bucketed.graphs}
        got = bucketed(feeds)
        want = eager(feeds)
        assert got.shape == want.shape == (count, 32) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=f"{count} rows x {length}")
        used = [g for g in bucketed.graphs if g.replays > before[id(g)]]
        assert bucketed.mode == ("graph" if batches else "eager")
        assert {(g.batch, g.inner_shapes["input_ids"]) for g in used} == {
            (batch, (length,)) for batch in batches
        }, f"{count} rows x {length}"


def test_bucketed_encoder_pads_and_slices_like_eager_on_cpu(tiny_bert: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("traced on the GPU here: test_cuda_graphs_match_eager covers it")
    _check(tiny_bert, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the lent H100)")
def test_cuda_graphs_match_eager(tiny_bert: Path) -> None:
    """Real captures, one shared memory pool, replays padded, chunked and sliced back."""
    _check(tiny_bert, "cuda")
