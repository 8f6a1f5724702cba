"""The nmt build as named steps, for either architecture: [train] → export → verify → [the search
inside the engine] → write repository entries.

Writes the architecture's encoder and decoder step models (ONNX, or another engine's through the
shared precision/engine hook) and its python BLS model running the beam search: ``nmt``,
``nmt_encoder``, ``nmt_decoder`` for the Transformer; ``nmt_rnn``, ``nmt_rnn_encoder``,
``nmt_rnn_decoder`` for the RNN. ``--search engine`` adds the whole search as one engine
(``nmt_generate``/``nmt_rnn_generate``), which the BLS model then calls instead; where that
engine has no step models beside it (``--engine torch`` int8-dynamic for the Transformer,
``--engine torch`` for the RNN), the BLS model is written alone. What differs between the two
is the :class:`~triton_kit.build_engines.families.nmt.architecture.Architecture`'s.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.build_engines.families.nmt import repository
from triton_kit.build_engines.families.nmt.architecture import TOLERANCE, Parity
from triton_kit.build_engines.families.nmt.export import export_steps
from triton_kit.build_engines.families.nmt.options import architecture
from triton_kit.build_engines.repository import write_model
from triton_kit.build_engines.serving import DryRun, serving_artifacts
from triton_kit.build_engines.steps import BuildError, StepLog, info

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Architecture, Verification
    from triton_kit.build_engines.families.nmt.options import NmtOptions
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.python_models.nmt.decode import DecodeSettings
    from triton_kit.python_models.nmt.settings import Limits


def run(options: BuildOptions, model_options: NmtOptions) -> None:
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    arch = architecture(model_options.architecture)
    checkpoint = model_options.checkpoint_dir
    out = options.output_repository
    name = arch.names.bls
    staging = options.work_dir / name
    dry_run = options.dry_run
    if dry_run and model_options.train:
        raise BuildError("nmt: --dry-run with --train: train first, then plan the engines")
    generate = engine_search(arch, options, model_options.search_for(options.engine.value))
    text = ct2_text(options, model_options)
    log = StepLog(name, (2 if dry_run else 4 + generate) + model_options.train)
    if model_options.train:
        from triton_kit.build_engines.families.nmt.train import train

        log.run(f"train the {arch.name} model", train, arch, checkpoint, model_options.train_steps)
    onnx = (staging / "encoder.onnx", staging / "decoder.onnx")
    sentences = None
    if dry_run:  # the configs need only the checkpoint's settings: no weights, no export
        model = log.run(
            "read checkpoint config (dry run: no weights)", arch.config_only, checkpoint
        )
        info(f"dry run: {onnx[0]} and {onnx[1]} are not exported, nothing is written")
    else:
        staging.mkdir(parents=True, exist_ok=True)
        model = log.run("load checkpoint", arch.load, checkpoint)
        log.run("export encoder + decoder-step ONNX", export_steps, arch, model, *onnx)
        sentences = arch.verification(checkpoint, model_options.verify_sentences)
        log.run(
            "verify ONNX vs PyTorch", _verify, arch, model, checkpoint, onnx, sentences, options
        )
    settings = arch.decode_settings(model)
    bounds = arch.limits(model, model_options.max_beam_size)
    if generate and sentences is not None:
        log.run(
            "write the search inside the engine",
            _write_generation,
            arch,
            out,
            model,
            checkpoint,
            onnx,
            settings,
            bounds,
            sentences,
            options,
            text,
        )
    log.run(
        "write model_repository entries",
        _write,
        arch,
        out,
        checkpoint,
        model,
        onnx,
        settings,
        bounds,
        options,
        generate,
        text,
    )
    info(f"decode: {settings}")
    info(f"limits: {bounds}")


def engine_search(arch: Architecture, options: BuildOptions, search: str) -> bool:
    """Whether the BLS model calls the whole search as one engine (``names.generate``); refuses,
    before any work, what the architecture has no engine for, and ``--engine torch`` precisions
    its TorchScript search does not build."""
    from triton_kit.build_engines.engines.registry import Engine

    generate = arch.engine_search(options, search)
    if generate and options.engine is Engine.TORCH:
        from triton_kit.build_engines.engines.torchscript.script import gpu_visible
        from triton_kit.build_engines.families.nmt.torch_search import check_precision

        check_precision(arch, options.precision, gpu_visible())
    return generate


def ct2_text(options: BuildOptions, model_options: NmtOptions) -> bool:
    """Whether ``nmt`` is the ctranslate2 backend's text model (``--ct2-text``, or left out with
    ``--engine ctranslate2`` for the Transformer: defaults.py); ``--ct2-text`` refused, before
    any work, without ``--engine ctranslate2``."""
    from triton_kit.build_engines.engines.registry import Engine

    if model_options.ct2_text and options.engine is not Engine.CTRANSLATE2:
        raise BuildError(
            f"nmt: --ct2-text serves the CTranslate2 model in text mode; it needs --engine "
            f"ctranslate2, not --engine {options.engine.value}"
        )
    return model_options.ct2_text_for(options.engine.value)


def _verify(
    arch: Architecture,
    model,
    checkpoint: Path,
    onnx: tuple[Path, Path],
    sentences: Verification,
    options: BuildOptions,
) -> Parity:
    parity = arch.compare(model, checkpoint, onnx, sentences, options.threads)
    info(
        f"max abs diff: encoder {parity.encoder_max_abs_diff:.2e}, "
        f"decoder logits {parity.decoder_max_abs_diff:.2e} (tolerance {TOLERANCE:g})"
    )
    parity.check()
    return parity


def _write_generation(
    arch: Architecture,
    out: Path,
    model,
    checkpoint: Path,
    onnx: tuple[Path, Path],
    settings: DecodeSettings,
    bounds: Limits,
    sentences: Verification,
    options: BuildOptions,
    text: bool = False,
) -> None:
    """The TorchScript search with ``--engine torch``, the CTranslate2 model with ``--engine
    ctranslate2``; else the architecture's ONNX search graph (the Transformer's: ONNX
    Runtime's BeamSearch operator)."""
    from triton_kit.build_engines.engines.registry import Engine

    if options.engine is Engine.TORCH:
        from triton_kit.build_engines.families.nmt.torch_search import write_generation

        write_generation(arch, out, model, checkpoint, onnx, settings, bounds, sentences, options)
        return
    if options.engine is Engine.CTRANSLATE2:
        from triton_kit.build_engines.families.nmt.ct2_engine import write_ct2

        tokenizer = arch.tokenizer_checkpoint(checkpoint)
        text_model = arch.names.bls if text else None
        write_ct2(out, checkpoint, tokenizer, settings, bounds, sentences, options, text_model)
        return
    arch.write_search_graph(out, model, settings, options)


def _write(
    arch: Architecture,
    out: Path,
    checkpoint: Path,
    model,
    onnx: tuple[Path, Path],
    settings: DecodeSettings,
    bounds: Limits,
    options: BuildOptions,
    generate: bool = False,
    text: bool = False,
) -> None:
    """Encoder and decoder go through the shared precision/engine hook; then the BLS model.
    Where the search engine has no step models beside it, the BLS model alone; with
    ``--ct2-text`` nothing (the text model, written with the engine, is the model served)."""
    names = arch.names
    if text:
        if options.dry_run:
            raise DryRun(f"dry run: nothing converted or written for {names.bls} (--ct2-text)")
        info(f"{names.bls} is the ctranslate2 backend's text model: no python model written")
        remove_stale(arch, out, {names.bls})
        return
    tokenizer = arch.tokenizer_checkpoint(checkpoint)
    calls = generate_model(names.generate, options) if generate else None
    if not arch.writes_step_models(options, generate):
        if options.dry_run:
            raise DryRun(f"dry run: nothing scripted or written for {names.bls} and {calls}")
        repository.write_bls(out, tokenizer, settings, bounds, options, names.steps, calls)
        info(f"wrote {out}/{names.bls} (calls {calls} by BLS; no step models)")
        remove_stale(arch, out, {names.bls, calls})
        return
    configs = {
        names.encoder: (onnx[0], arch.encoder_config(model, settings, bounds, options)),
        names.decoder: (onnx[1], arch.decoder_config(model, settings, bounds, options)),
    }
    axes = {names.encoder: arch.encoder_axes, names.decoder: arch.decoder_axes}
    sources = arch.calibration_sources(checkpoint, onnx, settings, bounds)
    torch_sources = _torch_sources(arch, model, options)
    artifacts, dry_run = {}, False
    for name, (path, config) in configs.items():
        try:
            artifacts[name] = serving_artifacts(
                name,
                path,
                config,
                options,
                sources.get(name),
                torch_source=torch_sources.get(name),
                dynamic_axes=axes[name],
            )
        except DryRun:
            dry_run = True  # describe every model before ending the step
    if dry_run:
        raise DryRun(f"dry run: nothing built or written for {names.bls}")
    for config, files in artifacts.values():
        write_model(out, config, files)
    repository.write_bls(out, tokenizer, settings, bounds, options, names.steps, calls)
    what = f"{options.precision}, {options.engine.value}"
    info(f"wrote {out}/{names.bls}, {out}/{names.encoder}, {out}/{names.decoder} ({what})")
    remove_stale(arch, out, {names.bls, names.encoder, names.decoder, calls})


def remove_stale(arch: Architecture, out: Path, written: set[str | None]) -> None:
    """Remove the models of ``arch`` that an earlier build wrote into ``out`` and this one did
    not (``nmt_encoder``/``nmt_decoder`` after switching to the CTranslate2 default, ``nmt_ct2``
    or ``nmt_generate`` after switching back): nothing calls them any more, and the server would
    still load them."""
    import shutil

    from triton_kit.build_engines.families.nmt.ct2_engine import CT2_MODEL

    names = arch.names
    owned = {names.encoder, names.decoder, names.generate}
    if names.bls == repository.BLS:  # nmt_ct2 is the Transformer's (CTranslate2 has no RNN)
        owned.add(CT2_MODEL)
    for name in sorted(owned - written):
        if (out / name / "config.pbtxt").is_file():
            shutil.rmtree(out / name)
            info(f"removed {out}/{name}: an earlier build's, which {names.bls} no longer calls")


def generate_model(name: str, options: BuildOptions) -> str:
    """The model the BLS model calls for the whole search: ``nmt_ct2`` with ``--engine
    ctranslate2``, else the architecture's generation model ``name``."""
    from triton_kit.build_engines.engines.registry import Engine

    if options.engine is Engine.CTRANSLATE2:
        from triton_kit.build_engines.families.nmt.ct2_engine import CT2_MODEL

        return CT2_MODEL
    return name


def _torch_sources(arch: Architecture, model, options: BuildOptions):
    """The PyTorch modules ``--engine torch`` scripts (none for a dry run or other engines)."""
    from triton_kit.build_engines.engines.registry import Engine

    if options.engine is not Engine.TORCH or options.dry_run:
        return {}
    return arch.torch_sources(model)
