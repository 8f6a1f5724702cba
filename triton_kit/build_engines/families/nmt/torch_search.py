"""``--engine torch --search engine``: write ``nmt_generate``, the whole search as TorchScript.

The module (:mod:`triton_kit.build_engines.families.nmt.torchscript.generate`) is scripted in the
build's dtype on the device the served instance will use (``KIND_GPU`` where a GPU is
visible), checked against Hugging Face ``generate`` on the verify sentences at beam 1 and 4,
and written with a ``pytorch_libtorch`` config (Triton's own pytorch backend serves it). A
mismatch fails the build, naming the sentences: every sentence must be HF's. At fp16 a
near-tie may flip between half and HF's fp32, so the search itself is checked exactly on an
fp32 twin scripted on the same device, and the fp16 module must agree on at least half the
sentences (a broken half-precision path agrees on none).

``--precision int8-dynamic`` (CPU only: refused where a GPU is visible, since the build puts
the module there) scripts the same search over steps whose ``nn.Linear`` layers PyTorch's
dynamic quantisation made qint8
(:mod:`triton_kit.build_engines.families.nmt.torchscript.int8_dynamic`): the search is checked
exactly on an fp32 twin, as for fp16, and the int8 module must agree with HF on
:data:`MIN_AGREEMENT` of the sentences at each beam size.

The check runs the saved file, freshly loaded, under the JIT executor its config serves it
with: the first call picks the executor, and the in-memory module under the default executor
once passed a file that the backend then ran wrong (fp16 on the H100: EOS or ',' for every
sentence under the simple executor, from the decoder step's ``-1e9`` mask offset, -inf in
half precision; with :func:`triton_kit.build_engines.families.nmt.export.mask_bias` the same step is
16/16 there, ``benchmarks/results/gpu/nmt-export-step-fp16-h100.log``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from triton_kit.build_engines.engines.torchscript.config import (
    TorchConfigOptions,
    optimized_execution,
    torch_model_config,
)
from triton_kit.build_engines.engines.torchscript.script import gpu_visible
from triton_kit.build_engines.families.nmt.export import load_model
from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import PRECISION as INT8_DYNAMIC
from triton_kit.build_engines.repository import Tensor, set_parameters, write_model
from triton_kit.build_engines.steps import BuildError, info
from triton_kit.python_models.nmt.decode import DecodeSettings, Job
from triton_kit.python_models.nmt.generate import TORCH_GENERATE_OUTPUT

if TYPE_CHECKING:
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.python_models.nmt.settings import Limits

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
PRECISIONS = (*DTYPES, INT8_DYNAMIC)  # int8-dynamic: fp32 activations, qint8 linear weights
CHECK_BEAMS = (1, 4)
# Of the verify sentences identical to the fp32 reference, per beam size (fp32: all). Lower
# precision may flip a near-tie; a broken path agrees on none. int8-dynamic, measured: the
# number Transformer 32/32 held-out sentences at beam 1 and 4, 31/32 with 16 of them
# word-shuffled (the model unsure); the number RNN 32/32 and 24/24 (12 shuffled). A
# random-weight Marian, where every step is a near-tie, agreed on 15-23 of 48: int8 changes
# its translations, and the build refuses it.
MIN_AGREEMENT = {"fp32": 1.0, "fp16": 0.5, INT8_DYNAMIC: 0.75}


def generate_config(name: str, options: BuildOptions, gpu: bool):
    """Batched rows (the ``nmt`` model sends a beam size's sentences in one call; Triton's
    statistics count them), one ``num_beams`` and ``max_length`` per row. No dynamic
    batcher: merging two calls could mix beam sizes, which the module refuses."""
    from triton_kit.build_engines.families.nmt.repository import DEFAULT_MAX_BATCH_SIZE

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


@functools.lru_cache(maxsize=4)
def _hf_reference(checkpoint: Path, texts: tuple[str, ...], max_length: int) -> tuple:
    """(source ids, {beam: HF ids}) of the verify sentences: computed once for every module
    a build checks (an fp16 build checks two)."""
    from transformers import MarianTokenizer

    reference = load_model(checkpoint)
    tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
    sources = [tokenizer(t, truncation=True)["input_ids"] for t in texts]
    return sources, {b: hf_ids(reference, tokenizer, texts, b, max_length) for b in CHECK_BEAMS}


def check_against_hf(
    module,
    checkpoint: Path,
    texts: Sequence[str],
    max_length: int,
    device: str,
    precision: str,
    optimized: bool = False,
) -> None:
    """The module's ids against HF ``generate`` (fp32) at each of :data:`CHECK_BEAMS`, under
    the JIT executor ``optimized`` names; too many differences fail the build."""
    sources, references = _hf_reference(Path(checkpoint), tuple(texts), max_length)
    for beam, expected in references.items():
        jobs = [Job(ids, beam, max_length) for ids in sources]
        got = module_ids(module, jobs, optimized)
        what = f"nmt_generate ({precision}, {device}) vs HF generate, beam {beam}"
        require_agreement(
            got, expected, what, f"HF generate at beam {beam} ({precision})", precision, texts
        )


def allowed_differences(count: int, precision: str) -> int:
    """How many of ``count`` sentences may differ from the reference at ``precision``."""
    return int(count * (1 - MIN_AGREEMENT[precision]))


def module_ids(module, jobs: Sequence[Job], optimized: bool) -> list[list[int]]:
    """The search module's ids for ``jobs`` under the JIT executor ``optimized`` names."""
    from triton_kit.build_engines.families.nmt.torchscript.generate import generate

    with torch.jit.optimized_execution(optimized):
        return generate(module, jobs)


def require_agreement(
    got: list[list[int]],
    expected: list[list[int]],
    what: str,
    against: str,
    precision: str,
    sources: Sequence,
) -> None:
    """Logs ``what: n/N sentences identical``; more differences than ``precision`` allows
    fail the build, naming the first differing source (``sources[i]`` of sentence ``i``)."""
    differ = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
    info(f"{what}: {len(got) - len(differ)}/{len(got)} sentences identical")
    if len(differ) > allowed_differences(len(got), precision):
        first = differ[0]
        raise BuildError(
            f"{what}: {len(differ)} of {len(got)} sentences differ from {against}; the "
            f"first, {sources[first]!r}: {got[first]} against {expected[first]}"
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
    from triton_kit.build_engines.families.nmt.torchscript.generate import generation_module

    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    check_precision(options.precision, gpu)
    if options.precision == "fp16" and not gpu:
        info(f"{name}: no GPU visible; the FP16 search will run slowly on CPU")
    int8 = options.precision == INT8_DYNAMIC
    dtype = DTYPES.get(options.precision, torch.float32)
    module = generation_module(checkpoint, settings, device, dtype, int8_dynamic=int8)
    check = (checkpoint, texts, limits.default_max_length, device)
    if options.precision != "fp32":  # the search itself, exactly, on an fp32 twin
        check_against_hf(generation_module(checkpoint, settings, device), *check, "fp32")

    def against_hf(served, optimized: bool) -> None:
        check_against_hf(served, *check, options.precision, optimized)

    return write_checked(out, name, module, against_hf, options, gpu)


def check_precision(precision: str, gpu: bool) -> None:
    """Refuse, before any work, what ``--engine torch --search engine`` does not build."""
    if precision not in PRECISIONS:
        raise BuildError(
            f"--search engine with --engine torch builds {'/'.join(PRECISIONS)}, not {precision}"
        )
    if precision == INT8_DYNAMIC:
        from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import refuse_gpu

        refuse_gpu(gpu, "--engine torch --search engine")


def write_checked(
    out: Path,
    name: str,
    module: torch.jit.ScriptModule,
    check: Callable[[torch.jit.ScriptModule, bool], None],
    options: BuildOptions,
    gpu: bool,
) -> Path:
    """Save ``module``, load the file back as Triton's pytorch backend will and run
    ``check(loaded, optimized)`` on it under the JIT executor its config serves it with (the
    first call picks the executor); then write ``name``. The path of its ``model.pt``."""
    from triton_kit.build_engines.families.nmt.torchscript.generate import save

    device = "cuda" if gpu else "cpu"
    path = save(module, options.work_dir / "torch" / name / "model.pt")
    config = generate_config(name, options, gpu)
    check(torch.jit.load(str(path), map_location=device), optimized_execution(config))
    write_model(out, config, {"model.pt": path})
    info(f"wrote {out}/{name} (TorchScript search, {options.precision}, {device})")
    return path
