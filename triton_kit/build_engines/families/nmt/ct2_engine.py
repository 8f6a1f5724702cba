"""``--engine ctranslate2``: the Marian checkpoint converted by CTranslate2, served natively by
the kit's own ``ctranslate2`` Triton backend as ``nmt_ct2`` (issue 31).

``ctranslate2.converters.TransformersConverter`` writes ``model.bin``, ``config.json`` and the
shared vocabulary into ``nmt_ct2/1/`` (int8 weights by default, ``--precision fp32`` for
float32). Before anything is written, the converted model is run by the ``ctranslate2`` Python
package (the same library the backend links) on the held-out sentences at beam 1 and 4 with
the served settings, and checked against the reference translations (num2words for the
number model): at least :data:`MIN_EXACT` of them exact, as the other engines' builds do. A
checkpoint without references (no ``split.json``: e.g. opus-mt-en-de, or the benchmark's random
Marian) is translated at both beams but nothing is counted (its verify targets are its sources).
The ``nmt`` python model then tokenises, sends its batch's ids in one BLS call and
detokenises (:mod:`triton_kit.python_models.nmt.generate`); it imports no engine.

With ``--ct2-text`` the same converted model is written as ``nmt`` itself instead, the backend in
its text mode (:func:`text_config`: parameter ``source_spm``, the python ``nmt`` model's
``TEXT``/``BEAM_SIZE``/``MAX_LENGTH`` → ``TRANSLATION`` contract and limits, sentencepiece inside
the C++ backend), and neither the python model nor ``nmt_ct2`` is written: no stub on the path
(docs/nmt_ct2_stub.md; benchmarks/results/nmt_ct2_text.md).
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.build_engines.repository import (
    ModelConfig,
    Tensor,
    add_inputs,
    add_outputs,
    set_instances,
    set_parameters,
    write_model,
)
from triton_kit.build_engines.steps import BuildError, info
from triton_kit.python_models.nmt.generate import (
    CT2_BEAM,
    CT2_LENGTH,
    CT2_OUTPUT,
    CT2_PATIENCE,
    CT2_SOURCE,
)

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Verification
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.python_models.nmt.decode import DecodeSettings
    from triton_kit.python_models.nmt.settings import Limits

CT2_MODEL = "nmt_ct2"
BACKEND = "ctranslate2"
QUANTIZATION = {"int8": "int8", "fp32": "float32"}  # --precision -> CTranslate2's
SOURCE_SPM = "source.spm"  # the text mode's tokeniser, copied into the version folder
CHECK_BEAMS = (1, 4)
MIN_EXACT = 0.9  # of the verify sentences, per beam; the fp32/int8 number model: all


def check_precision(precision: str) -> str:
    if precision not in QUANTIZATION:
        raise BuildError(
            f"--engine ctranslate2 builds {' or '.join(QUANTIZATION)} (CTranslate2's int8 or "
            f"float32 weights), not {precision}; it is nmt's default engine: --engine onnxruntime "
            f"(or tensorrt, torch) builds {precision} step models"
        )
    return QUANTIZATION[precision]


def ct2_config(
    options: BuildOptions, quantization: str, settings: DecodeSettings, limits: Limits
) -> ModelConfig:
    """Requests of any source length batch together (ragged: the backend reads each one's
    rows); one ``translate_batch`` per beam size and limit of the batch. Threads: ``--threads``
    (default 1) per instance."""
    from tritonclient.grpc import model_config_pb2

    from triton_kit.build_engines.families.nmt.repository import DEFAULT_MAX_BATCH_SIZE

    config = model_config_pb2.ModelConfig(
        name=CT2_MODEL,
        backend=BACKEND,
        max_batch_size=options.max_batch_size or DEFAULT_MAX_BATCH_SIZE,
    )
    add_inputs(
        config,
        [
            Tensor(CT2_SOURCE, "INT32", (-1,)),
            Tensor(CT2_BEAM, "INT32", (1,), optional=True),
            Tensor(CT2_LENGTH, "INT32", (1,), optional=True),
        ],
    )
    config.input[0].allow_ragged_batch = True
    add_outputs(config, [Tensor(CT2_OUTPUT, "INT32", (-1,))])
    set_instances(config, options.instances or 1)
    config.dynamic_batching.max_queue_delay_microseconds = 0
    set_parameters(
        config,
        {
            "device": "cpu",
            "compute_type": quantization,
            "intra_threads": options.threads or 1,
            "beam_size": limits.default_beam_size,
            "max_beam_size": limits.max_beam_size,
            "max_decoding_length": limits.default_max_length - 1,
            "patience": CT2_PATIENCE,
            "length_penalty": settings.length_penalty,
        },
    )
    return config


def text_config(
    name: str,
    options: BuildOptions,
    quantization: str,
    settings: DecodeSettings,
    limits: Limits,
) -> ModelConfig:
    """The backend's text mode as ``name`` (``nmt``): the python ``nmt`` model's inputs and
    output (families/nmt/repository.py ``write_bls``) and its limits as parameters; the
    ids mode's settings (:func:`ct2_config`) otherwise. ``TEXT`` rows are one element each,
    so requests batch without ragged batching."""
    from triton_kit.build_engines.families.nmt.repository import BATCH_DELAY_US
    from triton_kit.build_engines.repository import enable_dynamic_batching

    config = ct2_config(options, quantization, settings, limits)
    config.name = name
    del config.input[:]
    del config.output[:]
    add_inputs(
        config,
        [
            Tensor("TEXT", "STRING", (1,)),
            Tensor("BEAM_SIZE", "INT32", (1,), optional=True),
            Tensor("MAX_LENGTH", "INT32", (1,), optional=True),
        ],
    )
    add_outputs(config, [Tensor("TRANSLATION", "STRING", (1,))])
    enable_dynamic_batching(config, BATCH_DELAY_US, queue=options.queue)
    set_parameters(
        config,
        {
            "source_spm": SOURCE_SPM,
            "max_source_length": limits.max_source_length,
            "max_target_length": limits.max_target_length,
            "max_text_bytes": limits.max_text_bytes,
            "max_beam_tokens": limits.max_beam_tokens,
        },
    )
    return config


def convert(checkpoint: Path, quantization: str, out: Path) -> Path:
    """The CTranslate2 model of ``checkpoint`` in ``out`` (replaced)."""
    from ctranslate2.converters import TransformersConverter

    if out.exists():
        shutil.rmtree(out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TransformersConverter(str(checkpoint)).convert(str(out), quantization=quantization)
    return out


def check_translations(
    model_dir: Path,
    tokenizer_dir: Path,
    quantization: str,
    sentences: Verification,
    limits: Limits,
    threads: int,
) -> None:
    """The converted model in process, on the verify sentences at each of
    :data:`CHECK_BEAMS`, with the ids the ``nmt`` model sends and the settings the backend
    serves; fewer than :data:`MIN_EXACT` exact references fail the build."""
    import ctranslate2

    from triton_kit.python_models.nmt.text import MarianText

    text = MarianText(tokenizer_dir, limits.max_source_length)
    translator = ctranslate2.Translator(
        str(model_dir), device="cpu", compute_type=quantization, intra_threads=threads
    )
    vocabulary = _source_tokens(model_dir)
    sources = [[vocabulary[i] for i in text.encode(s)] for s in sentences.sources]
    pieces = {piece: index for index, piece in enumerate(_target_tokens(model_dir))}
    for beam in CHECK_BEAMS:
        results = translator.translate_batch(
            sources,
            beam_size=beam,
            max_decoding_length=limits.default_max_length - 1,
            patience=CT2_PATIENCE,
        )
        got = [text.decode([pieces[p] for p in r.hypotheses[0]]) for r in results]
        if not sentences.references:  # e.g. opus-mt-en-de, or the benchmark's random Marian
            info(
                f"{CT2_MODEL} ({quantization}), beam {beam}: translated {len(got)} sentences; "
                "no reference translations with this checkpoint (no split.json), none counted"
            )
            continue
        exact = sum(g == t for g, t in zip(got, sentences.targets, strict=True))
        info(f"{CT2_MODEL} ({quantization}) vs references, beam {beam}: {exact}/{len(got)} exact")
        if exact < MIN_EXACT * len(got):
            first = next(i for i, g in enumerate(got) if g != sentences.targets[i])
            raise BuildError(
                f"{CT2_MODEL} ({quantization}), beam {beam}: {exact}/{len(got)} exact; the "
                f"first miss, {sentences.sources[first]!r}: {got[first]!r}, expected "
                f"{sentences.targets[first]!r}"
            )


def _source_tokens(model_dir: Path) -> list[str]:
    return _vocabulary(model_dir, "source")


def _target_tokens(model_dir: Path) -> list[str]:
    return _vocabulary(model_dir, "target")


def _vocabulary(model_dir: Path, side: str) -> list[str]:
    """The converter writes ``shared_vocabulary.json``, or one file a side."""
    import json

    for name in ("shared_vocabulary.json", f"{side}_vocabulary.json"):
        path = model_dir / name
        if path.is_file():
            return json.loads(path.read_text("utf-8"))
    raise BuildError(f"no {side} vocabulary in {model_dir}")


def write_ct2(
    out: Path,
    checkpoint: Path,
    tokenizer_dir: Path,
    settings: DecodeSettings,
    limits: Limits,
    sentences: Verification,
    options: BuildOptions,
    text_model: str | None = None,
) -> Path:
    """Convert, check and write ``nmt_ct2``, or with ``text_model`` that model in the backend's
    text mode (the source sentencepiece model beside it); the path of its version folder."""
    quantization = check_precision(options.precision)
    model_dir = convert(checkpoint, quantization, options.work_dir / "ct2" / CT2_MODEL)
    _check_ids_match(model_dir, tokenizer_dir)
    check_translations(
        model_dir, tokenizer_dir, quantization, sentences, limits, options.threads or 1
    )
    files: dict[str, Path | bytes | str] = {
        p.name: p for p in sorted(model_dir.iterdir()) if p.is_file()
    }
    if text_model is None:
        write_model(out, ct2_config(options, quantization, settings, limits), files)
        info(f"wrote {out}/{CT2_MODEL} (CTranslate2 {quantization}, backend {BACKEND})")
        return out / CT2_MODEL / "1"
    files[SOURCE_SPM] = tokenizer_dir / SOURCE_SPM
    write_model(out, text_config(text_model, options, quantization, settings, limits), files)
    info(
        f"wrote {out}/{text_model} (CTranslate2 {quantization}, backend {BACKEND}, text mode: "
        f"TEXT -> TRANSLATION, {SOURCE_SPM} in the backend; no python model, no {CT2_MODEL})"
    )
    return out / text_model / "1"


def _check_ids_match(model_dir: Path, tokenizer_dir: Path) -> None:
    """The ``nmt`` model sends Marian's ids (``vocab.json``); the backend reads them as
    CTranslate2 vocabulary positions: the two must agree on every token they share."""
    import json

    marian = json.loads((tokenizer_dir / "vocab.json").read_text("utf-8"))
    for side in ("source", "target"):
        tokens = _vocabulary(model_dir, side)
        wrong = [t for i, t in enumerate(tokens) if marian.get(t) != i]
        if wrong:
            raise BuildError(
                f"CTranslate2's {side} vocabulary orders tokens unlike vocab.json "
                f"({len(wrong)} differ, e.g. {wrong[0]!r}): the ids would not match"
            )
