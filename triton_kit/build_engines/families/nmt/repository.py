"""Write ``nmt_encoder``, ``nmt_decoder`` (ONNX) and ``nmt`` (python BLS) into a repository."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.build_engines.repository import (
    ModelConfig,
    Tensor,
    enable_dynamic_batching,
    onnx_model_config,
    python_model_config,
    python_shim,
    set_parameters,
    write_model,
)
from triton_kit.python_models.common.contracts import NMT_DECODER_INPUTS, NMT_DECODER_OUTPUTS
from triton_kit.python_models.nmt.decode import DecodeSettings
from triton_kit.python_models.nmt.settings import Limits, to_parameters
from triton_kit.python_models.nmt.text import TARGET_VOCAB

ENCODER, DECODER, BLS = "nmt_encoder", "nmt_decoder", "nmt"
# The whole search in one model: ONNX Runtime's BeamSearch
# (triton_kit/build_engines/families/nmt/generation_graph) or TorchScript
# (triton_kit/build_engines/families/nmt/torch_search).
GENERATE = "nmt_generate"
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
DEFAULT_MAX_BATCH_SIZE = 32
BATCH_DELAY_US = 0  # an idle search never waits; requests queued while it runs form its batch

if TYPE_CHECKING:
    from triton_kit.build_engines.options import BuildOptions


def _cache(settings: DecodeSettings) -> tuple[int, ...]:
    layers, heads, head_dim = settings.cache_shape
    return (layers, 2, -1, heads, -1, head_dim)


def shape_parameters(limits: Limits, options: BuildOptions) -> dict[str, int]:
    """Recorded on the ONNX models so TensorRT profiles cover every shape the BLS can send."""
    return {
        "max_source_length": limits.max_source_length,
        "max_target_length": limits.max_target_length,
        "max_beam_size": limits.max_beam_size,
        "max_batch": options.max_batch_size or DEFAULT_MAX_BATCH_SIZE,
    }


def encoder_config(
    settings: DecodeSettings, d_model: int, limits: Limits, options: BuildOptions
) -> ModelConfig:
    """max_batch_size 0: the BLS model sends whole padded batches itself."""
    config = onnx_model_config(
        ENCODER,
        inputs=[
            Tensor("input_ids", "INT64", (-1, -1)),
            Tensor("attention_mask", "INT64", (-1, -1)),
        ],
        outputs=[
            Tensor("last_hidden_state", "FP32", (-1, -1, d_model)),
            Tensor("cross_kv", "FP32", _cache(settings)),
        ],
        max_batch_size=0,
        instances=options.instances,
        threads=options.threads,
    )
    set_parameters(config, shape_parameters(limits, options))
    return config


def decoder_config(
    settings: DecodeSettings, vocab: int, limits: Limits, options: BuildOptions
) -> ModelConfig:
    """The step's tensors in the contract's order (python_models.common.contracts): ``past_kv``
    holds the previous step's rows, ``beam_index`` picks the one each row continues."""
    ids, mask, cross, past, beam_index = NMT_DECODER_INPUTS
    logits, present = NMT_DECODER_OUTPUTS
    config = onnx_model_config(
        DECODER,
        inputs=[
            Tensor(ids, "INT64", (-1, 1)),
            Tensor(mask, "INT64", (-1, -1)),
            Tensor(cross, "FP32", _cache(settings)),
            Tensor(past, "FP32", _cache(settings)),
            Tensor(beam_index, "INT64", (-1,)),
        ],
        outputs=[
            Tensor(logits, "FP32", (-1, vocab)),
            Tensor(present, "FP32", _cache(settings)),
        ],
        max_batch_size=0,
        instances=options.instances,
        threads=options.threads,
    )
    set_parameters(config, shape_parameters(limits, options))
    return config


def generate_config(options: BuildOptions) -> ModelConfig:
    """ONNX Runtime's BeamSearch graph (a Loop over the rows, generation_graph.py): the ``nmt``
    model sends its whole padded batch in one call, one ``num_beams`` and ``max_length`` per
    row. max_batch_size 0 with a variable batch dimension, not Triton's batcher: its one caller
    (the ``nmt`` instance) already sends whole batches, calls of different source widths could
    not be merged without padding, and ``length_penalty`` is one value a call."""
    rows, padded = (-1,), (-1, -1)
    return onnx_model_config(
        GENERATE,
        inputs=[
            Tensor("input_ids", "INT32", padded),
            Tensor("attention_mask", "INT32", padded),
            Tensor("num_beams", "INT32", rows),
            Tensor("max_length", "INT32", rows),
            Tensor("length_penalty", "FP32", (1,)),
        ],
        outputs=[Tensor("sequences", "INT32", padded)],
        max_batch_size=0,
        instances=options.instances,
        threads=options.threads,
    )


def write_bls(
    repository: Path,
    checkpoint: Path,
    settings: DecodeSettings,
    limits: Limits,
    options: BuildOptions,
    names: tuple[str, str, str] = (BLS, ENCODER, DECODER),
    generate: str | None = None,
) -> Path:
    """Dynamic batching gathers concurrent requests into one execute call (one beam search).

    ``names``: the BLS model, and the encoder and decoder models it calls; ``generate``: the
    generation graph's model, which then runs the search instead
    (triton_kit/python_models/nmt/model).
    """
    bls, encoder, decoder = names
    parameters = {
        "encoder_model": encoder,
        "decoder_model": decoder,
        "intra_op_thread_count": options.threads,  # of the in-process sessions
    }
    if generate:
        parameters["generate_model"] = generate
    parameters.update(to_parameters(settings, limits))
    config = python_model_config(
        bls,
        inputs=[
            Tensor("TEXT", "STRING", (1,)),
            Tensor("BEAM_SIZE", "INT32", (1,), optional=True),
            Tensor("MAX_LENGTH", "INT32", (1,), optional=True),
        ],
        outputs=[Tensor("TRANSLATION", "STRING", (1,))],
        max_batch_size=options.max_batch_size or DEFAULT_MAX_BATCH_SIZE,
        parameters=parameters,
        instances=options.instances,
    )
    enable_dynamic_batching(config, BATCH_DELAY_US, queue=options.queue)
    files: dict[str, Path | str] = {
        "model.py": python_shim("triton_kit.python_models.nmt.model.NmtModel")
    }
    files.update({name: checkpoint / name for name in TOKENIZER_FILES})
    if (checkpoint / TARGET_VOCAB).exists():
        files[TARGET_VOCAB] = checkpoint / TARGET_VOCAB
    return write_model(repository, config, files)
