"""CTranslate2 as the NMT benchmark's peer: the checkpoint converted (Marian only, so the
Transformer's benchmark only), float32 or int8, as a batch function behind the micro-batcher."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import sentencepiece as spm

from triton_kit.benchmarks.nmt.measure import BatchFn

# CTranslate2 ends a beam search once beam_size x patience hypotheses have finished (HF's
# early_stopping=True); these checkpoints' generation configs say early_stopping=False (HF
# goes on while a running beam can still win). With patience 1 the search returned degenerate
# early finishers for 14-19 % of sentences; with 2 it returns HF's translations.
CT2_PATIENCE = 2


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
