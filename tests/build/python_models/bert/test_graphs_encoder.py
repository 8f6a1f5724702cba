"""The ``bert`` model's bucketed TorchScript encoder pads, slices and chunks like the eager one.

A 2-layer BERT with random weights is built and traced as the torch engine does (seconds), so
these live in tests/build/; the bookkeeping alone is tested in
tests/unit/python_models/bert/test_graphs.py. ``CudaGraph`` on a CPU device keeps the same
static buffers and runs eagerly; the `gpu` test captures real graphs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from triton_kit.python_models.bert.text import pad_rows
from triton_kit.python_models.bert.torch_encoder import TorchEncoder
from triton_kit.python_models.common.cuda_graphs import batch_buckets

NAMES = ("input_ids", "attention_mask")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT with random weights, mean-pooled and traced as the torch engine does."""
    from transformers import BertConfig, BertModel

    from triton_kit.build_engines.engines.torchscript import script_module
    from triton_kit.build_engines.families.bert import mean_pooled_encoder

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
