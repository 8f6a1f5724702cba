"""The exported decoder step: its tensor contract, and the beam reorder it does in the graph.

References independent of the graph: Hugging Face's own decoder run on the whole prefix
(no cache) for the logits, and a numpy gather of the previous step's ``present_kv`` for
the cache (what the search did between steps before the reorder moved into the graph).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.nmt_steps import agree_over_steps
from triton_kit.build_engines.families.nmt import export, repository
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.transformer import TRANSFORMER, decode_settings, limits
from triton_kit.build_engines.options import BuildOptions
from triton_kit.python_models.common.contracts import (
    BEAM_INDEX,
    NMT_DECODER_INPUTS,
    NMT_DECODER_OUTPUTS,
)
from triton_kit.python_models.nmt.decode import Job, generate
from triton_kit.python_models.nmt.ort import OrtStepModel, session

_TYPES = {onnx.TensorProto.INT64: "INT64", onnx.TensorProto.FLOAT: "FP32"}


@pytest.fixture(scope="module")
def model():
    return export.load_model(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def graphs(model, tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("nmt_export")
    return (
        export.export_encoder(TRANSFORMER, model, tmp / "encoder.onnx"),
        export.export_decoder(TRANSFORMER, model, tmp / "decoder.onnx"),
    )


def _io(values) -> list[tuple[str, str, int]]:
    return [
        (v.name, _TYPES[v.type.tensor_type.elem_type], len(v.type.tensor_type.shape.dim))
        for v in values
    ]


def test_decoder_graph_matches_the_served_contract(model, graphs) -> None:
    """The graph's inputs and outputs are the contract's, as the nmt_decoder config serves."""
    graph = onnx.load(str(graphs[1]), load_external_data=False).graph
    assert [v.name for v in graph.input] == list(NMT_DECODER_INPUTS)
    assert [v.name for v in graph.output] == list(NMT_DECODER_OUTPUTS)
    config = repository.decoder_config(
        decode_settings(model), model.config.vocab_size, limits(model, 4), BuildOptions()
    )
    assert _io(graph.input) == _served(config.input)
    assert _io(graph.output) == _served(config.output)
    index = next(v for v in graph.input if v.name == BEAM_INDEX)
    assert index.type.tensor_type.shape.dim[0].dim_param == "rows"


def test_decoder_graph_reads_few_shapes(model, graphs) -> None:
    """Head splits and merges are reshapes to constant shapes (the step's query is one
    position): the graph reads only the past's length and rows and the source length. Each
    read is a Shape/Gather/Unsqueeze/Concat chain; reading every ``x.shape`` gave 71 Shape
    and 81 Unsqueeze nodes, half of ONNX Runtime's kernel time at one row."""
    ops = [node.op_type for node in onnx.load(str(graphs[1])).graph.node]
    assert ops.count("Shape") <= 3
    assert ops.count("Unsqueeze") <= 6
    assert ops.count("Transpose") <= 2 * model.config.decoder_layers  # the keys, to multiply


def test_mask_bias_is_finite_and_exact_in_float16() -> None:
    """-1e9 is -inf in float16 (a masked score of ``0 * -inf`` is NaN in a fused kernel): the
    bias is the dtype's lowest finite value where the mask is 0, and 0 where it is 1."""
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    for dtype in (torch.float16, torch.float32):
        bias = export.mask_bias(mask, dtype)
        assert bias.shape == (2, 1, 1, 3) and bias.dtype == dtype
        assert bool(torch.isfinite(bias).all())
        expected = torch.where(mask.bool(), 0.0, torch.finfo(dtype).min).to(dtype)
        torch.testing.assert_close(bias[:, 0, 0], expected, atol=0, rtol=0)


def _served(tensors) -> list[tuple[str, str, int]]:
    """(name, type, rank) of a config's inputs or outputs, in the graph's spelling."""
    return [
        (t.name, mc.DataType.Name(t.data_type).removeprefix("TYPE_"), len(t.dims)) for t in tensors
    ]


def _hf_logits(model, source, mask, prefixes: np.ndarray) -> np.ndarray:
    """The last position's logits of Hugging Face's decoder over each whole prefix."""
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(source),
            attention_mask=torch.from_numpy(mask),
            decoder_input_ids=torch.from_numpy(prefixes),
        )
    return out.logits[:, -1].numpy()


def test_in_graph_reorder_matches_a_numpy_gather_and_hf(model, graphs) -> None:
    """Three steps on two rows (greedy: the identity index), then a step that swaps and
    duplicates rows (beam 2's first expansion, reordered): the cache is the numpy gather of
    the previous ``present_kv``, the logits HF's on the reordered prefixes."""
    encoder, decoder = (session(path, 1) for path in graphs)
    source = np.array([[5, 6, 7, 8, 0], [9, 10, 0, 57, 57]], dtype=np.int64)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=np.int64)
    cross = encoder.run(None, {"input_ids": source, "attention_mask": mask})[1]
    start = model.config.decoder_start_token_id
    prefixes = np.array([[start, 11, 12], [start, 13, 14]], dtype=np.int64)
    past = np.zeros(export.cache_shape(model, 2, 0), dtype=np.float32)
    for step in range(prefixes.shape[1]):
        feed = (prefixes[:, step : step + 1], mask, cross, past, np.arange(2))
        logits, past = decoder.run(None, dict(zip(NMT_DECODER_INPUTS, feed, strict=True)))
        expected = _hf_logits(model, source, mask, prefixes[:, : step + 1])
        np.testing.assert_allclose(logits, expected, atol=2e-4)
    beam_index = np.array([1, 0, 0, 1], dtype=np.int64)
    tokens = np.array([[15], [16], [17], [18]], dtype=np.int64)
    feed = (tokens, mask[beam_index], np.take(cross, beam_index, axis=2), past, beam_index)
    logits, present = decoder.run(None, dict(zip(NMT_DECODER_INPUTS, feed, strict=True)))
    assert present.shape == export.cache_shape(model, 4, 4)
    np.testing.assert_array_equal(present[..., :3, :], np.take(past, beam_index, axis=2))
    reordered = np.concatenate([prefixes[beam_index], tokens], axis=1)
    expected = _hf_logits(model, source[beam_index], mask[beam_index], reordered)
    np.testing.assert_allclose(logits, expected, atol=2e-4)


class _NumpyReorder(OrtStepModel):
    """The same graphs driven the old way: the search gathers the cache in numpy between
    steps and the graph is fed the identity index."""

    def __init__(self, encoder: Path, decoder: Path) -> None:
        super().__init__(encoder, decoder, threads=1)
        self.reorders = False

    def step(self, input_ids, attention_mask, cross_kv, past_kv, beam_index=None):
        assert beam_index is None
        identity = np.arange(len(input_ids))
        return super().step(input_ids, attention_mask, cross_kv, past_kv, identity)


def test_search_gives_the_same_ids_either_way(model, graphs) -> None:
    """Beam search with the reorder in the graph equals the numpy-gather search, id for id."""
    settings = decode_settings(model)
    sources = [[5, 6, 7, 8, 0], [9, 10, 0], [20, 21, 22, 0], [30, 0]]
    jobs = [Job(ids, beam, 12) for ids, beam in zip(sources, (3, 1, 4, 3), strict=True)]
    in_graph = OrtStepModel(*graphs, threads=1)
    assert in_graph.reorders
    assert generate(in_graph, jobs, settings) == generate(_NumpyReorder(*graphs), jobs, settings)


def test_the_concatenating_form_computes_what_the_gathering_form_does(model) -> None:
    """The ``concat_cache`` step (one gather, per-layer concatenation: the layout of ONNX
    Runtime's BeamSearch subgraph) against the exported form and Hugging Face, over a greedy
    step and a reordering one."""
    forms = [export.DecoderStepGraph(model, concat_cache=flag).eval() for flag in (False, True)]
    source = torch.tensor([[5, 6, 7, 8, 0], [9, 10, 0, 57, 57]])
    mask = (source != 0).long() * torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    start = model.config.decoder_start_token_id
    feeds = [(torch.tensor([[start], [start]]), torch.arange(2))]
    feeds.append((torch.tensor([[15], [16], [17]]), torch.tensor([1, 0, 1])))
    logits, rows = agree_over_steps(model, forms, source, mask, feeds)
    prefixes = np.array([[start, 15], [start, 16], [start, 17]])
    expected = _hf_logits(model, source[rows].numpy(), mask[rows].numpy(), prefixes)
    np.testing.assert_allclose(logits.numpy(), expected, atol=2e-4)
