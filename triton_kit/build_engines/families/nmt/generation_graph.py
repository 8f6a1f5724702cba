"""Marian generation as ONE ONNX graph: ONNX Runtime's ``com.microsoft.BeamSearch`` runs the
search (greedy is beam 1) over an encoder subgraph and a decoder-with-cache subgraph.

The operator's encoder-decoder contract (``model_type=1``, the T5 layout of
``onnxruntime/contrib_ops/cpu/transformers/subgraph_t5_*.cc``), with the first decoder
step inside the encoder subgraph so the encoder runs once per sentence, not per beam:

- encoder: ``encoder_input_ids``, ``encoder_attention_mask``, ``decoder_input_ids`` (the
  start token, int32) → ``logits [B, 1, vocab]``, ``encoder_hidden_states``, then
  ``present_{key,value}_self_<i>`` (one position) and ``present_{key,value}_cross_<i>``;
- decoder: ``input_ids [B, 1]``, ``encoder_attention_mask``, ``past_{key,value}_self_<i>``,
  ``past_{key,value}_cross_<i>`` → ``logits``, ``present_{key,value}_self_<i>``.

What Hugging Face ``generate`` does for Marian and the operator does not, the graph does:

- the ids Marian bans (``bad_words_ids``: the pad token) go in the operator's
  ``vocab_mask`` (an initializer), which, like HF's processor, masks the log-softmax;
- forced EOS at the length limit is in both subgraphs: at ``cur_len == max_length - 1``
  every logit but EOS is -inf, so after the operator's log-softmax EOS scores 0, as HF's
  ``ForcedEOSTokenLogitsProcessor`` sets it. The step reads ``max_length`` from the outer
  graph (an ONNX outer-scope value, which the operator passes to its subgraphs);
- the length penalty needs nothing: the operator divides by the hypothesis length with the
  start token and without EOS, the count HF divides by (generated tokens with EOS).

Decoder start = pad, scaled embeddings, sinusoidal positions and ``final_logits_bias`` come
from :class:`triton_kit.build_engines.families.nmt.export.DecoderStepGraph`'s arithmetic (its
``concat_cache`` form: the operator keeps one cache tensor per layer and reorders it by beam
itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx
import torch
from onnx import TensorProto, helper
from torch import nn

from triton_kit.build_engines.engines import onnx_export
from triton_kit.build_engines.families.nmt.export import DecoderStepGraph, EncoderGraph, mask_bias
from triton_kit.python_models.nmt.decode import DecodeSettings

MAX_LENGTH = "max_length"
ROW_MAX_LENGTH = "row_max_length"  # one row's limit inside the loop; the subgraphs read it
NUM_BEAMS, LENGTH_PENALTY = "num_beams", "length_penalty"
OPERATOR_DOMAIN = "com.microsoft"
SEQUENCES = "sequences"
# The operator's inputs inside the loop body, in its order; "" is an optional input left out.
OPERATOR_INPUTS = (
    "row_ids",
    ROW_MAX_LENGTH,
    "min_length",  # an initializer: 0
    "row_num_beams",
    "num_return_sequences",  # an initializer: 1
    LENGTH_PENALTY,
    "",  # repetition_penalty: HF's default (1.0) for Marian
    "vocab_mask",  # an initializer: the checkpoint's banned ids
    "",  # prefix_vocab_mask
    "row_mask",
)


@dataclass(frozen=True)
class SearchTokens:
    """What the operator and the subgraphs need to know of the checkpoint's generation."""

    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int
    vocab_size: int
    banned_token_ids: tuple[int, ...] = ()
    forced_eos: bool = True
    early_stopping: bool = False

    @classmethod
    def of(cls, settings: DecodeSettings, vocab_size: int) -> SearchTokens:
        """From the served model's decode settings (the checkpoint's generation config)."""
        if settings.early_stopping not in (True, False):
            raise ValueError(
                f"early_stopping={settings.early_stopping!r}: the BeamSearch operator has "
                "only true and false"
            )
        return cls(
            decoder_start_token_id=settings.decoder_start_token_id,
            eos_token_id=settings.eos_token_id,
            pad_token_id=settings.pad_token_id,
            vocab_size=vocab_size,
            banned_token_ids=tuple(settings.suppressed_token_ids),
            forced_eos=settings.forced_eos,
            early_stopping=bool(settings.early_stopping),
        )


class _Step(nn.Module):
    """One decoder step over per-layer self caches, shared by both subgraphs.

    ``MarianDecoderLayer``'s arithmetic (post-norm) for one new position, with every reshape
    to a constant shape (``[rows, 1, d_model]`` and ``[rows, heads, 1, head_dim]`` share a
    memory layout): no Shape/Gather/Concat chains or Transposes are traced, and at a few
    rows a step costs what its nodes cost to launch in ONNX Runtime.
    """

    def __init__(self, model: nn.Module, tokens: SearchTokens) -> None:
        super().__init__()
        self.step = DecoderStepGraph(model, concat_cache=True)
        config = model.config
        self.heads = config.decoder_attention_heads
        self.head_dim = config.d_model // self.heads
        self.forced_eos = tokens.forced_eos
        only_eos = torch.full((1, 1, tokens.vocab_size), float("-inf"))
        only_eos[..., tokens.eos_token_id] = 0.0
        self.register_buffer("only_eos", only_eos)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, self.heads, 1, self.head_dim)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, 1, self.heads * self.head_dim)

    def forward(self, input_ids, encoder_attention_mask, past_self, cross, max_length):
        step = self.step
        past_len = past_self[0][0].shape[2]
        position = step.positions[past_len : past_len + 1]
        hidden = step.embed(input_ids.long()) * step.embed_scale + position.unsqueeze(0)
        bias = mask_bias(encoder_attention_mask, hidden.dtype)
        present = []
        for index, layer in enumerate(step.layers):
            hidden, keys, values = self._layer(layer, hidden, past_self[index], cross[index], bias)
            present.extend([keys, values])
        logits = step.lm_head(hidden) + step.final_logits_bias
        if self.forced_eos:  # HF's cur_len (this step's input included) == max_length - 1
            force = (past_len + 2) == max_length.reshape(())
            logits = torch.where(force, self.only_eos, logits)
        return logits, present

    def _layer(self, layer, hidden, past, cross, bias):
        attn = layer.self_attn
        q = self._split(attn.q_proj(hidden))
        keys = torch.cat([past[0], self._split(attn.k_proj(hidden))], dim=2)
        values = torch.cat([past[1], self._split(attn.v_proj(hidden))], dim=2)
        out = self._attend(q, keys, values, None, attn.scaling)
        hidden = layer.self_attn_layer_norm(hidden + attn.out_proj(out))
        attn = layer.encoder_attn
        out = self._attend(self._split(attn.q_proj(hidden)), cross[0], cross[1], bias, attn.scaling)
        hidden = layer.encoder_attn_layer_norm(hidden + attn.out_proj(out))
        out = layer.fc2(layer.activation_fn(layer.fc1(hidden)))
        return layer.final_layer_norm(hidden + out), keys, values

    def _attend(self, q, keys, values, bias, scale):
        scores = torch.matmul(q, keys.transpose(2, 3)) * scale
        if bias is not None:
            scores = scores + bias
        return self._merge(torch.matmul(torch.softmax(scores, dim=-1), values))


class EncoderSubgraph(nn.Module):
    """Encoder, cross keys/values, and the first decoder step (the start token)."""

    def __init__(self, model: nn.Module, tokens: SearchTokens) -> None:
        super().__init__()
        self.encoder = EncoderGraph(model)
        self.first = _Step(model, tokens)
        self.heads = model.config.decoder_attention_heads

    def forward(self, encoder_input_ids, encoder_attention_mask, decoder_input_ids, max_length):
        hidden = self.encoder.encoder(
            input_ids=encoder_input_ids.long(), attention_mask=encoder_attention_mask.long()
        ).last_hidden_state
        split = self.encoder.split
        cross = [(split(a.k_proj(hidden)), split(a.v_proj(hidden))) for a in self.encoder.cross]
        rows, head_dim = hidden.shape[0], hidden.shape[2] // self.heads
        empty = hidden.new_zeros(rows, self.heads, 0, head_dim)
        past = [(empty, empty)] * len(cross)
        logits, present = self.first(
            decoder_input_ids, encoder_attention_mask, past, cross, max_length
        )
        return (logits, hidden, *present, *[t for pair in cross for t in pair])


class DecoderSubgraph(nn.Module):
    """One step: ``input_ids, encoder_attention_mask, *past_self, *past_cross, max_length``."""

    def __init__(self, model: nn.Module, tokens: SearchTokens) -> None:
        super().__init__()
        self.step = _Step(model, tokens)
        self.layers = model.config.decoder_layers

    def forward(self, input_ids, encoder_attention_mask, *rest):
        *past, max_length = rest
        n = self.layers
        past_self = [(past[2 * i], past[2 * i + 1]) for i in range(n)]
        cross = [(past[2 * n + 2 * i], past[2 * n + 2 * i + 1]) for i in range(n)]
        logits, present = self.step(input_ids, encoder_attention_mask, past_self, cross, max_length)
        return (logits, *present)


def _pairs(prefix: str, kind: str, layers: int) -> list[str]:
    return [f"{prefix}_{part}_{kind}_{i}" for i in range(layers) for part in ("key", "value")]


def _cache_shape(model: nn.Module, rows: int, length: int) -> tuple[int, int, int, int]:
    heads = model.config.decoder_attention_heads
    return (rows, heads, length, model.config.d_model // heads)


def export_encoder_subgraph(model: nn.Module, tokens: SearchTokens, path: Path) -> Path:
    layers = model.config.decoder_layers
    ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, 0, 0]], dtype=torch.int32)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.int32)
    start = torch.full((2, 1), tokens.decoder_start_token_id, dtype=torch.int32)
    self_out, cross_out = _pairs("present", "self", layers), _pairs("present", "cross", layers)
    axes = {"encoder_input_ids": {0: "B", 1: "S"}, "encoder_attention_mask": {0: "B", 1: "S"}}
    axes.update({"decoder_input_ids": {0: "B"}, "logits": {0: "B"}})
    axes["encoder_hidden_states"] = {0: "B", 1: "S"}
    axes.update({name: {0: "B"} for name in self_out})
    axes.update({name: {0: "B", 2: "S"} for name in cross_out})
    return _export(
        EncoderSubgraph(model, tokens),
        (ids, mask, start, torch.tensor([64], dtype=torch.int32)),
        path,
        ["encoder_input_ids", "encoder_attention_mask", "decoder_input_ids", MAX_LENGTH],
        ["logits", "encoder_hidden_states", *self_out, *cross_out],
        axes,
    )


def export_decoder_subgraph(model: nn.Module, tokens: SearchTokens, path: Path) -> Path:
    layers = model.config.decoder_layers
    rows, src_len, past_len = 3, 5, 4
    ids = torch.full((rows, 1), 5, dtype=torch.int32)
    mask = torch.ones(rows, src_len, dtype=torch.int32)
    past = [torch.randn(_cache_shape(model, rows, past_len)) for _ in range(2 * layers)]
    cross = [torch.randn(_cache_shape(model, rows, src_len)) for _ in range(2 * layers)]
    past_self, past_cross = _pairs("past", "self", layers), _pairs("past", "cross", layers)
    present = _pairs("present", "self", layers)
    axes = {"input_ids": {0: "B"}, "encoder_attention_mask": {0: "B", 1: "S"}, "logits": {0: "B"}}
    axes.update({name: {0: "B", 2: "P"} for name in past_self})
    axes.update({name: {0: "B", 2: "S"} for name in past_cross})
    axes.update({name: {0: "B", 2: "P1"} for name in present})
    return _export(
        DecoderSubgraph(model, tokens),
        (ids, mask, *past, *cross, torch.tensor([64], dtype=torch.int32)),
        path,
        ["input_ids", "encoder_attention_mask", *past_self, *past_cross, MAX_LENGTH],
        ["logits", *present],
        axes,
    )


def _export(module, example, path, inputs, outputs, axes) -> Path:
    """A standalone model (``max_length`` an input), checked by ONNX's checker."""
    return onnx_export.export(module, example, path, inputs, outputs, axes)


def as_subgraph(path: Path, int8_dynamic: bool = False) -> onnx.ModelProto:
    """The exported model with ``max_length`` read from the outer scope instead of an input
    (the row's limit, ``ROW_MAX_LENGTH`` in the loop body that holds the operator); with
    ``int8_dynamic``, its MatMul weights quantised first (ONNX Runtime's ``quantize_dynamic``,
    as ``--precision int8-dynamic`` does to the step models)."""
    if int8_dynamic:
        from triton_kit.build_engines.precision.int8_dynamic import to_int8_dynamic

        path = to_int8_dynamic(path, path.with_name(f"{path.stem}.int8-dynamic.onnx"))
    proto = onnx.load(str(path))
    for value in list(proto.graph.input):
        if value.name == MAX_LENGTH:
            proto.graph.input.remove(value)
    for node in proto.graph.node:
        node.input[:] = [ROW_MAX_LENGTH if name == MAX_LENGTH else name for name in node.input]
    return proto


def _constant(name: str, values: list, dtype: int = TensorProto.INT64, dims=None):
    """A Constant node giving ``name`` (a 1-D tensor, or ``dims``)."""
    shape = [len(values)] if dims is None else dims
    return helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name, dtype, shape, values)
    )


def _row_nodes(tokens: SearchTokens) -> list[onnx.NodeProto]:
    """The loop body before the operator: row ``i`` of the batch, its padding cut off (the
    ``nmt`` model pads on the right), and its own beam size and limit as [1] tensors."""
    return [
        _constant("axis_0", [0]),
        _constant("axis_1", [1]),
        _constant("start_0", [0], TensorProto.INT32),
        _constant("axis_1_i32", [1], TensorProto.INT32),
        helper.make_node("Unsqueeze", ["i", "axis_0"], ["row"]),
        helper.make_node("Gather", ["input_ids", "row"], ["row_ids_padded"], axis=0),
        helper.make_node("Gather", ["attention_mask", "row"], ["row_mask_padded"], axis=0),
        helper.make_node("ReduceSum", ["row_mask_padded", "axis_1"], ["row_length"], keepdims=0),
        helper.make_node(
            "Slice", ["row_ids_padded", "start_0", "row_length", "axis_1_i32"], ["row_ids"]
        ),
        helper.make_node(
            "Slice", ["row_mask_padded", "start_0", "row_length", "axis_1_i32"], ["row_mask"]
        ),
        helper.make_node("Gather", [NUM_BEAMS, "row"], ["row_num_beams"], axis=0),
        helper.make_node("Gather", [MAX_LENGTH, "row"], [ROW_MAX_LENGTH], axis=0),
    ]


def _padding_nodes(tokens: SearchTokens) -> list[onnx.NodeProto]:
    """The loop body after the operator: ``[1, 1, length]`` to ``[1, longest]``, pad after."""
    return [
        _constant("row_shape", [1, -1]),
        _constant("zeros_3", [0, 0, 0]),
        _constant("index_1", [1]),
        _constant("pad_value", [tokens.pad_token_id], TensorProto.INT32, dims=[]),
        helper.make_node("Reshape", ["row_sequences", "row_shape"], ["row_flat"]),
        helper.make_node("Shape", ["row_flat"], ["row_flat_shape"]),
        helper.make_node("Gather", ["row_flat_shape", "index_1"], ["row_width"], axis=0),
        helper.make_node("Sub", ["longest", "row_width"], ["row_missing"]),
        helper.make_node("Concat", ["zeros_3", "row_missing"], ["row_pads"], axis=0),
        helper.make_node("Pad", ["row_flat", "row_pads", "pad_value"], ["row_out"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ]


def build_generation_model(
    encoder: onnx.ModelProto, decoder: onnx.ModelProto, tokens: SearchTokens
) -> onnx.ModelProto:
    """A Loop over the batch's rows whose body is one BeamSearch over the two subgraphs, one
    sentence at a time (the operator cannot batch sentences exactly, module
    triton_kit/python_models/nmt/generate.py), so a whole batch is one call to the served
    model. Inputs: ``input_ids``/``attention_mask [batch, source]`` (int32, padded on the
    right), ``num_beams``/``max_length [batch]`` (int32, one per row), ``length_penalty
    [1]``. Output: ``sequences [batch, longest]`` (int32, start token first, pad after)."""
    encoder.graph.name, decoder.graph.name = "marian encoder", "marian decoder"
    search = helper.make_node(
        "BeamSearch",
        inputs=list(OPERATOR_INPUTS),
        outputs=["row_sequences"],
        name="BeamSearch_marian",
        domain=OPERATOR_DOMAIN,
        eos_token_id=tokens.eos_token_id,
        pad_token_id=tokens.pad_token_id,
        decoder_start_token_id=tokens.decoder_start_token_id,
        no_repeat_ngram_size=0,
        early_stopping=int(tokens.early_stopping),
        model_type=1,
        encoder=encoder.graph,
        decoder=decoder.graph,
    )
    body = helper.make_graph(
        [*_row_nodes(tokens), search, *_padding_nodes(tokens)],
        "one sentence",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("row_out", TensorProto.INT32, [1, "longest"]),
        ],
    )
    vocab_mask = [0 if i in tokens.banned_token_ids else 1 for i in range(tokens.vocab_size)]
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["ids_shape"], end=1),
        helper.make_node("Squeeze", ["ids_shape"], ["rows"]),
        helper.make_node("ReduceMax", [MAX_LENGTH], ["longest_i32"], keepdims=1),
        helper.make_node("Cast", ["longest_i32"], ["longest"], to=TensorProto.INT64),
        helper.make_node("Loop", ["rows", ""], ["rows_out"], body=body),
        _constant("out_shape", [0, -1]),
        helper.make_node("Reshape", ["rows_out", "out_shape"], [SEQUENCES]),
    ]
    batch = ["batch"]
    graph = helper.make_graph(
        nodes,
        "marian beam search, sentence by sentence",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "source"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "source"]),
            helper.make_tensor_value_info(NUM_BEAMS, TensorProto.INT32, batch),
            helper.make_tensor_value_info(MAX_LENGTH, TensorProto.INT32, batch),
            helper.make_tensor_value_info(LENGTH_PENALTY, TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info(SEQUENCES, TensorProto.INT32, ["batch", "length"])],
        [
            helper.make_tensor("vocab_mask", TensorProto.INT32, [tokens.vocab_size], vocab_mask),
            helper.make_tensor("min_length", TensorProto.INT32, [1], [0]),
            helper.make_tensor("num_return_sequences", TensorProto.INT32, [1], [1]),
        ],
    )
    opsets = [helper.make_opsetid("", onnx_export.DEFAULT_OPSET)]
    opsets.append(helper.make_opsetid(OPERATOR_DOMAIN, 1))
    return helper.make_model(graph, opset_imports=opsets, producer_name="triton-kit")


def export_generation(
    model: nn.Module, tokens: SearchTokens, path: Path, work: Path, int8_dynamic: bool = False
) -> Path:
    """Export both subgraphs under ``work`` and write the generation graph to ``path``."""
    encoder = export_encoder_subgraph(model, tokens, work / "generation_encoder.onnx")
    decoder = export_decoder_subgraph(model, tokens, work / "generation_decoder.onnx")
    proto = build_generation_model(
        as_subgraph(encoder, int8_dynamic), as_subgraph(decoder, int8_dynamic), tokens
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(proto, str(path))
    return path
