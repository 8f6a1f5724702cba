"""The torch engine's decoder step (fused q/k/v, fused attention) computes the exported step's
logits and cache, and Hugging Face's logits, over a first step, a greedy step and a reorder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.nmt_steps import agree_over_steps
from triton_kit.build_engines.families.nmt import export
from triton_kit.build_engines.families.nmt.torchscript.marian_step import MarianDecoderStep
from triton_kit.build_engines.families.nmt.torchscript.steps import decoder_feeds
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT


@pytest.fixture(scope="module")
def model():
    return export.load_model(DEFAULT_CHECKPOINT)


def _hf_logits(model, source, mask, prefixes) -> np.ndarray:
    with torch.no_grad():
        out = model(input_ids=source, attention_mask=mask, decoder_input_ids=prefixes)
    return out.logits[:, -1].numpy()


def test_the_step_computes_the_exported_steps_logits_and_cache(model) -> None:
    steps = [export.DecoderStepGraph(model).eval(), MarianDecoderStep(model).eval()]
    source = torch.tensor([[5, 6, 7, 8, 0], [9, 10, 0, 57, 57]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    start = model.config.decoder_start_token_id
    feeds = [  # (tokens, beam_index): the first step, a greedy step, a reorder to three rows
        (torch.tensor([[start], [start]]), torch.arange(2)),
        (torch.tensor([[11], [12]]), torch.arange(2)),
        (torch.tensor([[15], [16], [17]]), torch.tensor([1, 0, 1])),
    ]
    logits, rows = agree_over_steps(model, steps, source, mask, feeds)
    prefixes = torch.tensor([[start, 12, 15], [start, 11, 16], [start, 12, 17]])
    expected = _hf_logits(model, source[rows], mask[rows], prefixes)
    np.testing.assert_allclose(logits.numpy(), expected, atol=2e-4)


def test_the_traced_half_step_has_no_constant_beyond_half_range(model) -> None:
    """A float constant beyond fp16's range (the exported step's old ``-1e9`` mask offset) is
    -inf in half precision: with it the saved fp16 search answered EOS for every sentence on
    an H100 under the simple executor; with a finite offset the same step is right there."""
    feeds = [torch.from_numpy(v) for v in decoder_feeds(model, 3, 5, 4).values()]
    feeds = [t.half() if t.is_floating_point() else t for t in feeds]
    with torch.no_grad():
        traced = torch.jit.trace(MarianDecoderStep(model).eval().half(), feeds, check_trace=False)
        logits = traced(*feeds)[0]
    graph = traced.inlined_graph
    constants = [n.output().toIValue() for n in graph.findAllNodes("prim::Constant")]
    limit = torch.finfo(torch.float16).max
    assert [c for c in constants if isinstance(c, float) and abs(c) > limit] == []
    assert bool(torch.isfinite(logits).all())
