"""``--engine torch --search engine``: write the whole search as one TorchScript module.

``nmt_generate`` (Transformer) or ``nmt_rnn_generate`` (RNN): the search module
(:mod:`triton_kit.build_engines.families.nmt.torchscript.generate`) over the architecture's traced
steps, scripted in the build's dtype on the device the served instance will use (``KIND_GPU``
where a GPU is visible), checked against the architecture's reference on the verify sentences at
beam 1 and 4, and written with a ``pytorch_libtorch`` config (Triton's own pytorch backend serves
it). The Transformer's reference is Hugging Face ``generate``; the RNN, which has none, is checked
against the Python search the served ``nmt_rnn`` runs with ``--search python``
(:func:`triton_kit.python_models.nmt.decode.generate` over the build's verified fp32 ONNX step
graphs in ONNX Runtime). A mismatch fails the build, naming the sentences: at fp32 every sentence
must be the reference's. At fp16 (Transformer only) a near-tie may flip between half and the fp32
reference, so the search itself is checked exactly on an fp32 twin scripted on the same device,
and the fp16 module must agree on at least half the sentences (a broken half-precision path
agrees on none).

``--precision int8-dynamic`` (CPU only: refused where a GPU is visible, since the build puts
the module there) scripts the same search over steps whose ``nn.Linear`` layers (and the RNN's
``nn.GRU``) PyTorch's dynamic quantisation made qint8
(:mod:`triton_kit.build_engines.families.nmt.torchscript.int8_dynamic`): the search is checked
exactly on an fp32 twin, as for fp16, and the int8 module must agree with the reference on
:data:`MIN_AGREEMENT` of the sentences at each beam size.

The check runs the saved file, freshly loaded, under the JIT executor its config serves it
with: the first call picks the executor, and the in-memory module under the default executor
once passed a file that the backend then ran wrong (fp16 on the H100: EOS or ',' for every
sentence under the simple executor, from the decoder step's ``-1e9`` mask offset, -inf in
half precision; with :func:`triton_kit.build_engines.families.nmt.export.mask_bias` the same step is
16/16 there, ``benchmarks/results/gpu/nmt-export-step-fp16-h100.log``).
"""

from __future__ import annotations

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
from triton_kit.build_engines.families.nmt.architecture import SearchBuild
from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import PRECISION as INT8_DYNAMIC
from triton_kit.build_engines.repository import Tensor, set_parameters, write_model
from triton_kit.build_engines.steps import BuildError, info
from triton_kit.python_models.nmt.decode import DecodeSettings, Job
from triton_kit.python_models.nmt.generate import TORCH_GENERATE_OUTPUT

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import (
        Architecture,
        SearchReference,
        Verification,
    )
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.python_models.nmt.settings import Limits

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}  # int8-dynamic: fp32, qint8 weights

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


def write_generation(
    architecture: Architecture,
    out: Path,
    model,
    checkpoint: Path,
    onnx: tuple[Path, Path],
    settings: DecodeSettings,
    limits: Limits,
    sentences: Verification,
    options: BuildOptions,
) -> Path:
    """Script, check and write the architecture's search model (``names.generate``) over
    ``model``; the path of its ``model.pt``."""
    from triton_kit.build_engines.families.nmt.torchscript.generate import generation_module

    name = architecture.names.generate
    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    precision = options.precision
    check_precision(architecture, precision, gpu)
    if precision == "fp16" and not gpu:
        info(f"{name}: no GPU visible; the FP16 search will run slowly on CPU")
    int8 = precision == INT8_DYNAMIC
    dtype = DTYPES.get(precision, torch.float32)
    module = generation_module(architecture, model, settings, device, dtype, int8_dynamic=int8)
    max_length = limits.default_max_length
    reference = architecture.search_reference(
        SearchBuild(checkpoint, onnx, settings, sentences, max_length, CHECK_BEAMS, options.threads)
    )
    if precision != "fp32":  # the search itself, exactly, on an fp32 twin
        twin = generation_module(architecture, model, settings, device)
        check_search(twin, reference, max_length, f"{name} (fp32, {device})", "fp32")

    def against_reference(served, optimized: bool) -> None:
        label = f"{name} ({precision}, {device})"
        check_search(served, reference, max_length, label, precision, optimized)

    return write_checked(out, name, module, against_reference, options, gpu)


def check_precision(architecture: Architecture, precision: str, gpu: bool) -> None:
    """Refuse, before any work, what ``--engine torch --search engine`` does not build for
    ``architecture``."""
    what = f"--architecture {architecture.name} --engine torch --search engine"
    if precision not in architecture.torch_precisions:
        built = " or ".join(architecture.torch_precisions)
        raise BuildError(f"{what} builds {built}, not {precision}")
    if precision == INT8_DYNAMIC:
        from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import refuse_gpu

        refuse_gpu(gpu, what)


def check_search(
    module,
    reference: SearchReference,
    max_length: int,
    label: str,
    precision: str,
    optimized: bool = False,
) -> None:
    """The module's ids against ``reference`` at each of its beam sizes (``max_length`` per
    sentence), under the JIT executor ``optimized`` names; more differences than ``precision``
    allows (fp32: any) fail the build."""
    for beam, expected in reference.expected.items():
        jobs = [Job(list(ids), beam, max_length) for ids in reference.sources]
        got = module_ids(module, jobs, optimized)
        what = f"{label} {reference.versus}, beam {beam}"
        against = f"{reference.name} at beam {beam} ({precision})"
        require_agreement(got, list(expected), what, against, precision, reference.named)


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
