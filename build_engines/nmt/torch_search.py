"""``--engine torch --search engine``: write ``nmt_generate``, the whole search as TorchScript.

The module (:mod:`build_engines.torch_engine.nmt_generate`) is scripted in the build's dtype
on the device the served instance will use (``KIND_GPU`` where a GPU is visible), checked
against Hugging Face ``generate`` on the verify sentences at beam 1 and 4, and written with a
``pytorch_libtorch`` config (Triton's own pytorch backend serves it). A mismatch fails the
build, naming the sentences: every sentence must be HF's. At fp16 a near-tie may flip
between half and HF's fp32 (on a randomly initialised Marian, whose every step is a
near-tie, most sentences do), so the search itself is checked on an fp32 twin scripted on
the same device, and the fp16 module's agreement with HF is logged, not required.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from build_engines.nmt.export import load_model
from build_engines.repository import Tensor, set_parameters, write_model
from build_engines.steps import BuildError, info
from build_engines.torch_engine.config import TorchConfigOptions, torch_model_config
from build_engines.torch_engine.script import gpu_visible
from python_models.nmt.decode import DecodeSettings, Job
from python_models.nmt.generate import TORCH_GENERATE_OUTPUT

if TYPE_CHECKING:
    from build_engines.options import BuildOptions
    from python_models.nmt.settings import Limits

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
CHECK_BEAMS = (1, 4)


def generate_config(name: str, options: BuildOptions, gpu: bool):
    """Batched rows (the ``nmt`` model sends a beam size's sentences in one call; Triton's
    statistics count them), one ``num_beams`` and ``max_length`` per row. No dynamic
    batcher: merging two calls could mix beam sizes, which the module refuses."""
    from build_engines.nmt.repository import DEFAULT_MAX_BATCH_SIZE

    config = torch_model_config(
        name,
        inputs=[
            Tensor("input_ids", "INT64", (-1,)),
            Tensor("attention_mask", "INT64", (-1,)),
            Tensor("num_beams", "INT64", (1,)),
            Tensor("max_length", "INT64", (1,)),
        ],
        outputs=[Tensor(TORCH_GENERATE_OUTPUT, "INT64", (-1,))],
        options=TorchConfigOptions(
            max_batch_size=options.max_batch_size or DEFAULT_MAX_BATCH_SIZE,
            gpu=gpu,
            instances=options.instances or 1,
            precision=options.precision,
        ),
    )
    if not gpu and options.threads:
        set_parameters(config, {"INTRA_OP_THREAD_COUNT": options.threads})
    return config


def hf_ids(model, tokenizer, texts: Sequence[str], beam: int, max_length: int) -> list[list[int]]:
    """HF ``generate`` ids, start token and trailing padding off (the checkpoint's settings)."""
    batch = tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True)
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(
            **batch.to(device), num_beams=beam, max_length=max_length, do_sample=False
        )
    pad = model.generation_config.pad_token_id
    rows = []
    for row in out.tolist():
        row = row[1:]
        while row and row[-1] == pad:
            row.pop()
        rows.append(row)
    return rows


def check_against_hf(
    module,
    checkpoint: Path,
    settings: DecodeSettings,
    texts: Sequence[str],
    max_length: int,
    device: str,
    precision: str,
    required: bool = True,
) -> None:
    """The module's ids against HF ``generate`` (fp32) at each of :data:`CHECK_BEAMS`; any
    difference fails the build where ``required``, else it is only logged."""
    from transformers import MarianTokenizer

    from build_engines.torch_engine.nmt_generate import generate

    reference = load_model(checkpoint)
    tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
    for beam in CHECK_BEAMS:
        expected = hf_ids(reference, tokenizer, texts, beam, max_length)
        jobs = [Job(tokenizer(t, truncation=True)["input_ids"], beam, max_length) for t in texts]
        got = generate(module, jobs)
        differ = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
        info(
            f"nmt_generate ({precision}, {device}) vs HF generate, beam {beam}: "
            f"{len(texts) - len(differ)}/{len(texts)} sentences identical"
        )
        if differ and required:
            first = differ[0]
            raise BuildError(
                f"nmt_generate: {len(differ)} of {len(texts)} sentences differ from HF generate "
                f"at beam {beam} ({precision}); the first, {texts[first]!r}: "
                f"{got[first]} against {expected[first]}"
            )


def write_torch_generation(
    out: Path,
    name: str,
    checkpoint: Path,
    settings: DecodeSettings,
    limits: Limits,
    texts: Sequence[str],
    options: BuildOptions,
) -> Path:
    """Script, check and write ``name`` (``nmt_generate``); the path of its ``model.pt``."""
    from build_engines.torch_engine.nmt_generate import generation_module, save

    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    if options.precision not in DTYPES:
        raise BuildError(
            f"--search engine with --engine torch builds fp32/fp16, not {options.precision}"
        )
    if options.precision == "fp16" and not gpu:
        info(f"{name}: no GPU visible; the FP16 search will run slowly on CPU")
    module = generation_module(checkpoint, settings, device, DTYPES[options.precision])
    check = (checkpoint, settings, texts, limits.default_max_length, device)
    if options.precision == "fp16":  # the search on an fp32 twin; half's agreement logged
        check_against_hf(generation_module(checkpoint, settings, device), *check, "fp32")
    check_against_hf(module, *check, options.precision, required=options.precision == "fp32")
    path = save(module, options.work_dir / "torch" / name / "model.pt")
    write_model(out, generate_config(name, options, gpu), {"model.pt": path})
    info(f"wrote {out}/{name} (TorchScript search, {options.precision}, {device})")
    return path
