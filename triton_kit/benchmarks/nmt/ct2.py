"""CTranslate2 as the NMT benchmark's peer: the checkpoint converted (Marian only, so the
Transformer's benchmark only), float32 or int8, as a batch function behind the micro-batcher."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import sentencepiece as spm

from triton_kit.benchmarks.nmt.measure import BatchFn
from triton_kit.python_models.nmt.generate import CT2_PATIENCE  # what nmt_ct2 serves with


def ctranslate2_engine(
    checkpoint: Path, quantization: str, workdir: Path, threads: int, max_length: int
) -> BatchFn:
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    output = workdir / f"ct2-{checkpoint.name}-{quantization}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TransformersConverter(str(checkpoint)).convert(str(output), quantization=quantization)
    translator = ctranslate2.Translator(
        str(output), device="cpu", compute_type=quantization, intra_threads=threads
    )
    source = spm.SentencePieceProcessor(model_file=str(checkpoint / "source.spm"))

    def run(texts: Sequence[str], beam: int, done: Callable[[int, str], None]) -> None:
        tokens = [[*source.encode(t, out_type=str), "</s>"] for t in texts]
        results = translator.translate_batch(
            tokens, beam_size=beam, max_decoding_length=max_length - 1, patience=CT2_PATIENCE
        )
        for index, result in enumerate(results):
            done(index, "".join(result.hypotheses[0]).replace("\u2581", " ").strip())

    return run
