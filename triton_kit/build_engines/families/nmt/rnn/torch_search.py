"""``--architecture rnn --engine torch --search engine``: write ``nmt_rnn_generate``, the
recurrent model's whole search as TorchScript
(:mod:`triton_kit.build_engines.families.nmt.torchscript.rnn_generate`).

fp32, or int8-dynamic on CPU. The RNN has no Hugging Face ``generate``; its reference is the
Python search the served ``nmt_rnn`` runs with ``--search python``
(:func:`triton_kit.python_models.nmt.decode.generate` over the build's verified fp32 ONNX step
graphs in ONNX Runtime). At fp32 the saved file, freshly loaded, must give that search's ids
for every verify sentence at beam 1 and 4, or the build fails. int8-dynamic (``nn.Linear`` and
``nn.GRU`` dynamically quantised,
:mod:`triton_kit.build_engines.families.nmt.torchscript.int8_dynamic`; refused where a GPU is
visible) checks the search exactly on an fp32 twin, and the saved int8 file must agree with the
Python search on :data:`~build_engines.families.nmt.torch_search.MIN_AGREEMENT` of the sentences per
beam size. The config is the Transformer's ``nmt_generate`` config (``pytorch_libtorch``, batched
rows, one ``num_beams`` and ``max_length`` per row).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.build_engines.engines.torchscript.script import gpu_visible
from triton_kit.build_engines.families.nmt.torch_search import (
    CHECK_BEAMS,
    module_ids,
    require_agreement,
    write_checked,
)
from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import PRECISION as INT8_DYNAMIC
from triton_kit.build_engines.steps import BuildError
from triton_kit.python_models.nmt.decode import DecodeSettings, Job, StepModel, generate

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.rnn.model import RnnTranslator
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.python_models.nmt.settings import Limits

PRECISIONS = ("fp32", INT8_DYNAMIC)


def check_precision(options: BuildOptions) -> None:
    """Refuse, before any work, what this build does not make (fp16: its one reference is the
    fp32 Python search, and CPU half is slow; int8-dynamic where a GPU is visible)."""
    if options.precision not in PRECISIONS:
        raise BuildError(
            "--architecture rnn --engine torch --search engine builds fp32 or int8-dynamic, "
            f"not {options.precision}: its one reference is the fp32 Python search"
        )
    if options.precision == INT8_DYNAMIC:
        from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import refuse_gpu

        refuse_gpu(gpu_visible(), "--architecture rnn --engine torch --search engine")


def check_against_python_search(
    module,
    steps: StepModel,
    settings: DecodeSettings,
    sources: Sequence[Sequence[int]],
    max_length: int,
    optimized: bool = False,
    label: str = "the TorchScript search",
    precision: str = "fp32",
) -> None:
    """The module's ids against the Python search over ``steps`` at each of
    :data:`~build_engines.families.nmt.torch_search.CHECK_BEAMS`, under the JIT executor
    ``optimized`` names; more differences than ``precision`` allows (fp32: any) fail the
    build."""
    for beam in CHECK_BEAMS:
        jobs = [Job(list(ids), beam, max_length) for ids in sources]
        expected = generate(steps, jobs, settings)
        got = module_ids(module, jobs, optimized)
        what = f"{label} vs the Python search (ONNX Runtime), beam {beam}"
        sources_ids = [list(ids) for ids in sources]
        against = f"the Python search at beam {beam} ({precision})"
        require_agreement(got, expected, what, against, precision, sources_ids)


def write_rnn_generation(
    out: Path,
    name: str,
    model: RnnTranslator,
    onnx: tuple[Path, Path],
    settings: DecodeSettings,
    limits: Limits,
    sources: Sequence[Sequence[int]],
    options: BuildOptions,
) -> Path:
    """Script, check and write ``name``; the path of its ``model.pt``."""
    from triton_kit.build_engines.families.nmt.torchscript.rnn_generate import generation_module
    from triton_kit.python_models.nmt.ort import OrtStepModel

    check_precision(options)
    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    precision = options.precision
    int8 = precision == INT8_DYNAMIC
    module = generation_module(model, settings, device, int8_dynamic=int8)
    steps = OrtStepModel(*onnx, threads=options.threads or 1)
    check = (steps, settings, sources, limits.default_max_length)
    if int8:  # the search itself, exactly, on an fp32 twin
        twin = generation_module(model, settings, device)
        check_against_python_search(twin, *check, label=f"{name} (fp32, {device})")

    def against_python_search(served, optimized: bool) -> None:
        label = f"{name} ({precision}, {device})"
        check_against_python_search(served, *check, optimized, label, precision)

    return write_checked(out, name, module, against_python_search, options, gpu)
