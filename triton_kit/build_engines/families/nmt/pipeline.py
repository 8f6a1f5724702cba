"""The nmt build as named steps: [train] → export → verify → write repository entries."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.export import export_decoder, export_encoder, load_model
from triton_kit.build_engines.families.nmt.verify import TOLERANCE, Parity, compare
from triton_kit.build_engines.repository import write_model
from triton_kit.build_engines.serving import DryRun, serving_artifacts
from triton_kit.build_engines.steps import BuildError, StepLog, info
from triton_kit.python_models.nmt.decode import DecodeSettings
from triton_kit.python_models.nmt.settings import Limits

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.options import NmtOptions
    from triton_kit.build_engines.options import BuildOptions


def decode_settings(model) -> DecodeSettings:
    """Token ids and scoring from the checkpoint, as Hugging Face ``generate`` would use them."""
    config, generation = model.config, model.generation_config
    bad_words = generation.bad_words_ids or []
    heads = config.decoder_attention_heads
    return DecodeSettings(
        decoder_start_token_id=int(
            generation.decoder_start_token_id or config.decoder_start_token_id
        ),
        eos_token_id=int(_first(generation.eos_token_id, config.eos_token_id)),
        pad_token_id=int(_first(generation.pad_token_id, config.pad_token_id)),
        cache_shape=(config.decoder_layers, heads, config.d_model // heads),
        suppressed_token_ids=tuple(int(w[0]) for w in bad_words if len(w) == 1),
        forced_eos=generation.forced_eos_token_id is not None,
        length_penalty=_first(generation.length_penalty, 1.0),
        early_stopping=_first(generation.early_stopping, False),
    )


def _first(value, fallback):
    if isinstance(value, (list, tuple)):
        return value[0]
    return fallback if value is None else value


def limits(model, max_beam_size: int) -> Limits:
    """The search keeps 2 x beam candidates from one row at the first step: cap the beam."""
    positions = model.config.max_position_embeddings
    vocab = model.config.decoder_vocab_size or model.config.vocab_size
    return Limits(
        default_beam_size=min(4, max_beam_size),
        max_beam_size=min(max_beam_size, (vocab - 1) // 2),
        default_max_length=min(int(model.generation_config.max_length or positions), positions),
        max_target_length=positions,
        max_source_length=positions,
    )


def verification_texts(checkpoint: Path, count: int) -> tuple[list[str], list[str]]:
    """Held-out pairs for the default model; for other checkpoints, a few plain sentences."""
    split_file = checkpoint / "split.json"
    if split_file.exists():
        numbers = list(corpus.Split.load(split_file).test[:count])
        return [corpus.english(n) for n in numbers], [corpus.french(n) for n in numbers]
    sources = [corpus.english(n) for n in range(1, 1000, max(1, 1000 // count))][:count]
    return sources, sources


def run(options: BuildOptions, model_options: NmtOptions) -> None:
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    checkpoint = model_options.checkpoint_dir
    out = options.output_repository
    staging = options.work_dir / "nmt"
    dry_run = options.dry_run
    if dry_run and model_options.train:
        raise BuildError("nmt: --dry-run with --train: train first, then plan the engines")
    generate = engine_search(options, model_options)
    log = StepLog("nmt", (2 if dry_run else 4 + generate) + model_options.train)
    if model_options.train:
        from triton_kit.build_engines.families.nmt.train import TrainSettings, train

        settings = (
            TrainSettings()
            if model_options.train_steps is None
            else TrainSettings(steps=model_options.train_steps)
        )
        log.run("train the number model", train, checkpoint, settings)
    encoder_onnx, decoder_onnx = staging / "encoder.onnx", staging / "decoder.onnx"
    if dry_run:  # the configs need only the checkpoint's settings: no weights, no export
        model = log.run("read checkpoint config (dry run: no weights)", config_only, checkpoint)
        info(f"dry run: {encoder_onnx} and {decoder_onnx} are not exported, nothing is written")
    else:
        from transformers import MarianTokenizer

        model = log.run("load checkpoint", load_model, checkpoint)
        tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
        log.run("export encoder + decoder ONNX", _export, model, encoder_onnx, decoder_onnx)
        sources, targets = verification_texts(checkpoint, model_options.verify_sentences)
        log.run(
            "verify ONNX vs PyTorch",
            _verify,
            model,
            tokenizer,
            (encoder_onnx, decoder_onnx),
            (sources, targets),
            options.threads,
        )
    settings = decode_settings(model)
    bounds = limits(model, model_options.max_beam_size)
    log.run(
        "write model_repository entries",
        _write,
        out,
        checkpoint,
        model,
        encoder_onnx,
        decoder_onnx,
        settings,
        bounds,
        options,
        generate,
    )
    if generate and not dry_run:
        log.run(
            "write the search inside the engine (ONNX Runtime's BeamSearch, or TorchScript)",
            _write_generation,
            out,
            model,
            settings,
            options,
            checkpoint,
            bounds,
            sources,
        )
    info(f"decode: {settings}")
    info(f"limits: {bounds}")


def config_only(checkpoint: Path) -> SimpleNamespace:
    """What :func:`decode_settings` and :func:`limits` read, without loading the weights."""
    from transformers import GenerationConfig, MarianConfig

    config = MarianConfig.from_pretrained(str(checkpoint))
    try:
        generation = GenerationConfig.from_pretrained(str(checkpoint))
    except OSError:  # no generation_config.json: what from_pretrained derives for the model
        generation = GenerationConfig.from_model_config(config)
    return SimpleNamespace(config=config, generation_config=generation)


def _verify(model, tokenizer, onnx: tuple[Path, Path], texts, threads: int) -> Parity:
    parity = compare(model, tokenizer, *onnx, *texts, threads)
    info(
        f"max abs diff: encoder {parity.encoder_max_abs_diff:.2e}, "
        f"decoder logits {parity.decoder_max_abs_diff:.2e} (tolerance {TOLERANCE:g})"
    )
    parity.check()
    return parity


def _export(model, encoder_onnx: Path, decoder_onnx: Path) -> None:
    export_encoder(model, encoder_onnx)
    export_decoder(model, decoder_onnx)
    for path in (encoder_onnx, decoder_onnx):
        info(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB")


def engine_search(options: BuildOptions, model_options: NmtOptions) -> bool:
    """Whether ``nmt`` runs the search inside the engine (``nmt_generate``): ONNX Runtime's
    BeamSearch operator, on the graphs it can take (fp32, or int8-dynamic subgraphs), or the
    TorchScript search of ``--engine torch`` (fp32, fp16, int8-dynamic on CPU). Refuses,
    before any work, ``--engine torch`` int8-dynamic builds it cannot make."""
    from triton_kit.build_engines.engines.registry import Engine

    torch_int8 = options.engine is Engine.TORCH and options.precision == "int8-dynamic"
    if model_options.search != "engine":
        if torch_int8:
            raise BuildError(
                "--engine torch --precision int8-dynamic builds the search inside the engine "
                "only (the TorchScript step models are fp32/fp16): add --search engine"
            )
        return False
    if options.engine is Engine.TORCH:
        if torch_int8:
            from triton_kit.build_engines.engines.torchscript.script import gpu_visible
            from triton_kit.build_engines.families.nmt.torch_search import check_precision

            check_precision(options.precision, gpu_visible())
        return options.precision in ("fp32", "fp16", "int8-dynamic")
    return options.engine is Engine.ONNXRUNTIME and options.precision in ("fp32", "int8-dynamic")


def _write_generation(
    out: Path, model, settings, options: BuildOptions, checkpoint: Path, bounds, texts
) -> None:
    from triton_kit.build_engines.engines.registry import Engine
    from triton_kit.build_engines.families.nmt import repository

    if options.engine is Engine.TORCH:
        from triton_kit.build_engines.families.nmt.torch_search import write_torch_generation

        write_torch_generation(
            out, repository.GENERATE, checkpoint, settings, bounds, texts, options
        )
        return
    from triton_kit.build_engines.families.nmt.generation_graph import (
        SearchTokens,
        export_generation,
    )

    vocab = model.config.decoder_vocab_size or model.config.vocab_size
    work = options.work_dir / "nmt" / "generate"
    path = export_generation(
        model,
        SearchTokens.of(settings, vocab),
        work / "model.onnx",
        work,
        int8_dynamic=options.precision == "int8-dynamic",
    )
    write_model(out, repository.generate_config(options), {"model.onnx": path})
    info(f"wrote {out}/{repository.GENERATE} ({path.stat().st_size / 1e6:.1f} MB)")


def _write(
    out, checkpoint, model, encoder_onnx, decoder_onnx, settings, bounds, options, generate=False
) -> None:
    """Encoder and decoder go through the shared precision/engine hook; then the BLS model.
    ``--engine torch`` int8-dynamic writes the BLS model alone (it calls ``nmt_generate``):
    the torch engine has no int8 step models."""
    from triton_kit.build_engines.engines.registry import Engine
    from triton_kit.build_engines.families.nmt import repository
    from triton_kit.build_engines.families.nmt.calibration import calibration_sources
    from triton_kit.build_engines.families.nmt.export import DECODER_AXES, ENCODER_AXES

    if options.engine is Engine.TORCH and options.precision == "int8-dynamic":
        if options.dry_run:
            raise DryRun("dry run: nothing scripted or written for nmt and nmt_generate")
        repository.write_bls(
            out, checkpoint, settings, bounds, options, generate=repository.GENERATE
        )
        info(f"wrote {out}/nmt (calls {repository.GENERATE} by BLS; no step models)")
        return
    vocab = model.config.decoder_vocab_size or model.config.vocab_size
    configs = {
        repository.ENCODER: (
            encoder_onnx,
            repository.encoder_config(settings, model.config.d_model, bounds, options),
        ),
        repository.DECODER: (
            decoder_onnx,
            repository.decoder_config(settings, vocab, bounds, options),
        ),
    }
    axes = {repository.ENCODER: ENCODER_AXES, repository.DECODER: DECODER_AXES}
    sources = calibration_sources(
        checkpoint, encoder_onnx, decoder_onnx, settings, bounds.max_source_length
    )
    torch_sources = _torch_sources(model, options)
    artifacts, dry_run = {}, False
    for name, (onnx, config) in configs.items():
        try:
            artifacts[name] = serving_artifacts(
                name,
                onnx,
                config,
                options,
                sources[name],
                torch_source=torch_sources.get(name),
                dynamic_axes=axes[name],
            )
        except DryRun:
            dry_run = True  # describe every model before ending the step
    if dry_run:
        raise DryRun("dry run: nothing built or written for nmt")
    for config, files in artifacts.values():
        write_model(out, config, files)
    repository.write_bls(
        out,
        checkpoint,
        settings,
        bounds,
        options,
        generate=repository.GENERATE if generate else None,
    )
    engine = options.engine.value
    info(f"wrote {out}/nmt, {out}/nmt_encoder, {out}/nmt_decoder ({options.precision}, {engine})")


def _torch_sources(model, options: BuildOptions) -> dict:
    """The PyTorch modules ``--engine torch`` scripts (none for a dry run or other engines)."""
    from triton_kit.build_engines.engines.registry import Engine

    if options.engine is not Engine.TORCH or options.dry_run:
        return {}
    from triton_kit.build_engines.families.nmt.torchscript.steps import sources

    return sources(model)
