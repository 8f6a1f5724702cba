"""``build_engines nmt --architecture rnn``: [train] → export → verify → write ``nmt_rnn``.

Writes ``nmt_rnn_encoder``, ``nmt_rnn_decoder`` (ONNX, or TensorRT plans through the
shared engine hook) and ``nmt_rnn``: the same python BLS model and search as ``nmt``,
with the Transformer checkpoint's tokenizer and generation rules.

``--engine torch --search engine`` (fp32) writes ``nmt_rnn_generate`` instead of the step
models: the whole search as one TorchScript module
(triton_kit/build_engines/families/nmt/rnn/torch_search.py), which ``nmt_rnn`` calls by BLS as
``nmt`` calls ``nmt_generate``. The exported ONNX step graphs are still verified: the Python search
over them is the module's reference. Other ``--engine torch`` builds are refused (the torch
engine has no recurrent step source).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from triton_kit.build_engines.families.nmt import corpus, repository
from triton_kit.build_engines.families.nmt.rnn.export import (
    DECODER_AXES,
    ENCODER_AXES,
    compare,
    export_decoder,
    export_encoder,
)
from triton_kit.build_engines.families.nmt.rnn.model import RnnConfig, RnnTranslator, load
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT, encode
from triton_kit.build_engines.families.nmt.verify import TOLERANCE, Parity
from triton_kit.build_engines.repository import (
    ModelConfig,
    Tensor,
    onnx_model_config,
    set_parameters,
    write_model,
)
from triton_kit.build_engines.serving import DryRun, serving_artifacts
from triton_kit.build_engines.steps import BuildError, StepLog, info
from triton_kit.python_models.nmt.decode import DecodeSettings
from triton_kit.python_models.nmt.settings import Limits

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.options import NmtOptions
    from triton_kit.build_engines.options import BuildOptions

BLS, ENCODER, DECODER = "nmt_rnn", "nmt_rnn_encoder", "nmt_rnn_decoder"
GENERATE = "nmt_rnn_generate"  # the whole search, TorchScript (--engine torch --search engine)
TOKENIZER_CHECKPOINT = DEFAULT_CHECKPOINT  # vocabularies, split and generation rules
MAX_LENGTH = 64  # default, as in the Transformer's generation config
MAX_POSITIONS = 128  # request limits as the Transformer's (same errors for the same input)


def decode_settings(model: RnnTranslator) -> DecodeSettings:
    """The Transformer's generation rules (never emit <pad>, forced eos, beam 4, penalty 1)."""
    config = model.config
    return DecodeSettings(
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        cache_shape=(config.layers, 1, config.hidden),
        suppressed_token_ids=(config.pad_token_id,),
        forced_eos=True,
        length_penalty=1.0,
        early_stopping=False,
        recurrent_state=True,
    )


def limits(model: RnnTranslator, max_beam_size: int) -> Limits:
    return Limits(
        default_beam_size=min(4, max_beam_size),
        max_beam_size=min(max_beam_size, (model.config.vocab_size - 1) // 2),
        default_max_length=MAX_LENGTH,
        max_target_length=MAX_POSITIONS,
        max_source_length=MAX_POSITIONS,
    )


def _state(config) -> tuple[int, ...]:
    return (config.layers, 1, -1, config.hidden)


def _cross(config) -> tuple[int, ...]:
    return (1, 2, -1, -1, config.hidden)


def encoder_config(model: RnnTranslator, bounds: Limits, options: BuildOptions) -> ModelConfig:
    config = onnx_model_config(
        ENCODER,
        inputs=[
            Tensor("input_ids", "INT64", (-1, -1)),
            Tensor("attention_mask", "INT64", (-1, -1)),
        ],
        outputs=[
            Tensor("last_hidden_state", "FP32", (-1, -1, model.config.hidden)),
            Tensor("cross_kv", "FP32", _cross(model.config)),
        ],
        max_batch_size=0,
        instances=options.instances,
        threads=options.threads,
    )
    set_parameters(config, repository.shape_parameters(bounds, options))
    return config


def decoder_config(model: RnnTranslator, bounds: Limits, options: BuildOptions) -> ModelConfig:
    config = onnx_model_config(
        DECODER,
        inputs=[
            Tensor("input_ids", "INT64", (-1, 1)),
            Tensor("encoder_attention_mask", "INT64", (-1, -1)),
            Tensor("cross_kv", "FP32", _cross(model.config)),
            Tensor("past_kv", "FP32", _state(model.config)),
        ],
        outputs=[
            Tensor("logits", "FP32", (-1, model.config.vocab_size)),
            Tensor("present_kv", "FP32", _state(model.config)),
        ],
        max_batch_size=0,
        instances=options.instances,
        threads=options.threads,
    )
    set_parameters(config, repository.shape_parameters(bounds, options))
    return config


def verification_ids(count: int) -> tuple[list[list[int]], list[list[int]]]:
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(str(TOKENIZER_CHECKPOINT))
    numbers = list(corpus.Split.load(TOKENIZER_CHECKPOINT / "split.json").test[:count])
    sources = encode(tokenizer, [corpus.english(n) for n in numbers], False)
    return sources, encode(tokenizer, [corpus.french(n) for n in numbers], True)


def run(options: BuildOptions, model_options: NmtOptions) -> None:
    checkpoint = model_options.checkpoint_dir
    out = options.output_repository
    staging = options.work_dir / "nmt_rnn"
    dry_run = options.dry_run
    if dry_run and model_options.train:
        raise BuildError("nmt: --dry-run with --train: train first, then plan the engines")
    generate = engine_search(options, model_options)
    log = StepLog("nmt_rnn", (2 if dry_run else 4 + generate) + model_options.train)
    if model_options.train:
        from triton_kit.build_engines.families.nmt.rnn.train import RnnTrainSettings, train

        steps = model_options.train_steps or RnnTrainSettings.steps
        log.run("train the recurrent model", train, checkpoint, RnnTrainSettings(steps=steps))
    encoder_onnx, decoder_onnx = staging / "encoder.onnx", staging / "decoder.onnx"
    if dry_run:  # the configs need only the checkpoint's sizes: no weights, no export
        config = log.run("read checkpoint config (dry run: no weights)", RnnConfig.load, checkpoint)
        model = SimpleNamespace(config=config)
        info(f"dry run: {encoder_onnx} and {decoder_onnx} are not exported, nothing is written")
    else:
        staging.mkdir(parents=True, exist_ok=True)
        model = log.run("load checkpoint", load, checkpoint)
        log.run("export encoder + decoder-step ONNX", _export, model, encoder_onnx, decoder_onnx)
        log.run(
            "verify ONNX vs PyTorch",
            _verify,
            model,
            encoder_onnx,
            decoder_onnx,
            model_options.verify_sentences,
        )
    settings, bounds = decode_settings(model), limits(model, model_options.max_beam_size)
    if generate and not dry_run:
        from triton_kit.build_engines.families.nmt.rnn.torch_search import write_rnn_generation

        log.run(
            "write the search inside the engine (TorchScript)",
            write_rnn_generation,
            out,
            GENERATE,
            model,
            (encoder_onnx, decoder_onnx),
            settings,
            bounds,
            verification_ids(model_options.verify_sentences)[0],
            options,
        )
    log.run(
        "write model_repository entries",
        _write,
        out,
        model,
        (encoder_onnx, decoder_onnx),
        settings,
        bounds,
        options,
        generate,
    )


def engine_search(options: BuildOptions, model_options: NmtOptions) -> bool:
    """Whether ``nmt_rnn`` runs the TorchScript search (``nmt_rnn_generate``); refuses, before
    any work, the builds the recurrent model has no engine for."""
    from triton_kit.build_engines.engines.registry import Engine

    torch_engine = options.engine is Engine.TORCH
    if model_options.search == "engine" and not torch_engine:
        raise BuildError(
            "--architecture rnn --search engine is the TorchScript search: add --engine torch "
            "(ONNX Runtime's BeamSearch operator runs Transformer decoders only)"
        )
    if torch_engine and model_options.search != "engine":
        raise BuildError(
            "--architecture rnn --engine torch builds the whole search as TorchScript only: "
            "add --search engine (the step models are ONNX: --engine onnxruntime or tensorrt)"
        )
    if torch_engine:
        from triton_kit.build_engines.families.nmt.rnn.torch_search import check_precision

        check_precision(options)
    return torch_engine


def _export(model, encoder_onnx: Path, decoder_onnx: Path) -> None:
    export_encoder(model, encoder_onnx)
    export_decoder(model, decoder_onnx)
    for path in (encoder_onnx, decoder_onnx):
        info(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB")


def _verify(model, encoder_onnx, decoder_onnx, count: int) -> Parity:
    parity = compare(model, encoder_onnx, decoder_onnx, *verification_ids(count))
    info(
        f"max abs diff: encoder {parity.encoder_max_abs_diff:.2e}, "
        f"decoder logits {parity.decoder_max_abs_diff:.2e} (tolerance {TOLERANCE:g})"
    )
    parity.check()
    return parity


def _write(
    out: Path,
    model,
    onnx: tuple[Path, Path],
    settings,
    bounds,
    options: BuildOptions,
    generate: bool = False,
) -> None:
    """Both graphs through the shared precision/engine hook (no INT8 calibration source),
    then the BLS model; with ``generate``, the BLS model alone (it calls nmt_rnn_generate)."""
    if generate:
        if options.dry_run:
            raise DryRun(f"dry run: nothing scripted or written for {BLS} and {GENERATE}")
        repository.write_bls(
            out, TOKENIZER_CHECKPOINT, settings, bounds, options, (BLS, ENCODER, DECODER), GENERATE
        )
        info(f"wrote {out}/{BLS} (calls {GENERATE} by BLS)")
        return
    configs = {
        ENCODER: (onnx[0], encoder_config(model, bounds, options)),
        DECODER: (onnx[1], decoder_config(model, bounds, options)),
    }
    axes = {ENCODER: ENCODER_AXES, DECODER: DECODER_AXES}
    artifacts, dry_run = {}, False
    for name, (path, config) in configs.items():
        try:
            artifacts[name] = serving_artifacts(
                name, path, config, options, dynamic_axes=axes[name]
            )
        except DryRun:
            dry_run = True
    if dry_run:
        raise DryRun("dry run: nothing built or written for nmt_rnn")
    for config, files in artifacts.values():
        write_model(out, config, files)
    repository.write_bls(
        out,
        TOKENIZER_CHECKPOINT,
        settings,
        bounds,
        options,
        names=(BLS, ENCODER, DECODER),
    )
    what = f"{options.precision}, {options.engine.value}"
    info(f"wrote {out}/{BLS}, {out}/{ENCODER}, {out}/{DECODER} ({what})")
