"""``--architecture rnn --engine torch --search engine``: write ``nmt_rnn_generate``, the
recurrent model's whole search as TorchScript (:mod:`build_engines.torch_engine.rnn_generate`).

fp32 only. The RNN has no Hugging Face ``generate``; its reference is the Python search the
served ``nmt_rnn`` runs with ``--search python`` (:func:`python_models.nmt.decode.generate`
over the build's verified ONNX step graphs in ONNX Runtime). The saved file, freshly loaded,
must give that search's ids for every verify sentence at beam 1 and 4, or the build fails.
The config is the Transformer's ``nmt_generate`` config (``pytorch_libtorch``, batched rows,
one ``num_beams`` and ``max_length`` per row).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from build_engines.nmt.torch_search import CHECK_BEAMS, differing, module_ids, write_checked
from build_engines.steps import BuildError
from build_engines.torch_engine.script import gpu_visible
from python_models.nmt.decode import DecodeSettings, Job, StepModel, generate

if TYPE_CHECKING:
    from build_engines.nmt.rnn_model import RnnTranslator
    from build_engines.options import BuildOptions
    from python_models.nmt.settings import Limits

PRECISIONS = ("fp32",)


def check_precision(options: BuildOptions) -> None:
    if options.precision not in PRECISIONS:
        raise BuildError(
            "--architecture rnn --engine torch --search engine builds fp32 only, not "
            f"{options.precision}: its one reference is the fp32 Python search, which the "
            "build's check must match exactly"
        )


def check_against_python_search(
    module,
    steps: StepModel,
    settings: DecodeSettings,
    sources: Sequence[Sequence[int]],
    max_length: int,
    optimized: bool = False,
    label: str = "the TorchScript search",
) -> None:
    """The module's ids against the Python search over ``steps`` at each of
    :data:`~build_engines.nmt.torch_search.CHECK_BEAMS`, under the JIT executor
    ``optimized`` names; any difference fails the build."""
    for beam in CHECK_BEAMS:
        jobs = [Job(list(ids), beam, max_length) for ids in sources]
        expected = generate(steps, jobs, settings)
        got = module_ids(module, jobs, optimized)
        what = f"{label} vs the Python search (ONNX Runtime), beam {beam}"
        differ = differing(got, expected, what)
        if differ:
            first = differ[0]
            raise BuildError(
                f"{len(differ)} of {len(jobs)} sentences differ from the Python search at "
                f"beam {beam}; the first, source ids {list(sources[first])}: "
                f"{got[first]} against {expected[first]}"
            )


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
    from build_engines.torch_engine.rnn_generate import generation_module
    from python_models.nmt.ort import OrtStepModel

    check_precision(options)
    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    module = generation_module(model, settings, device)
    steps = OrtStepModel(*onnx, threads=options.threads or 1)
    label = f"{name} (fp32, {device})"

    def against_python_search(served, optimized: bool) -> None:
        check = (steps, settings, sources, limits.default_max_length)
        check_against_python_search(served, *check, optimized, label)

    return write_checked(out, name, module, against_python_search, options, gpu)
