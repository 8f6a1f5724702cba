"""What the NMT benchmark measures of each architecture, in one table.

The build's :class:`~triton_kit.build_engines.families.nmt.architecture.Architecture` gives the
served model names (``nmt`` or ``nmt_rnn`` and the models it calls) and the default checkpoint;
:data:`BENCHMARKED` adds what only the benchmark needs: which engines apply (CTranslate2
converts only Marian, so only the Transformer has it), which other builds of the checkpoint it
has (:data:`VARIANTS`: ONNX Runtime's BeamSearch graph is the Transformer's only; the recurrent
model has the TorchScript search alone), which sizes (``large`` is a random Marian), which
architectures its run measures beside it, and its run's flag defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.nmt.report import (
    CT2_FP32,
    CT2_INT8,
    IN_ENGINE,
    IN_PROCESS,
    IN_PROCESS_INT8,
    IN_PROCESS_TORCH,
    IN_PROCESS_TORCH_INT8,
    RNN_LABEL,
    TRANSFORMER_LABEL,
    TRITON,
    TRITON_CT2,
    TRITON_CT2_TEXT,
    TRITON_GRAPH,
    TRITON_INT8,
    TRITON_TORCH,
    TRITON_TORCH_INT8,
)
from triton_kit.build_engines.families.nmt.architecture import ModelNames
from triton_kit.build_engines.families.nmt.options import ARCHITECTURES
from triton_kit.build_engines.families.nmt.repository import BLS, DECODER, ENCODER, GENERATE

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Architecture

ROOT = Path(__file__).resolve().parents[3]
# TRANSFORMER.names without importing the model code (torch): the default of the helpers the
# GPU benchmark calls with the Transformer's repository.
TRANSFORMER_NAMES = ModelNames(BLS, ENCODER, DECODER, GENERATE)
INT8_PRECISION = "int8-dynamic"
TORCH_GENERATE_ARGS = ("--engine", "torch", "--search", "engine")
ORT_GRAPH_ARGS = ("--engine", "onnxruntime", "--search", "engine")
# The python nmt in front of nmt_ct2 (BLS); the default build is the text mode (ct2-text below).
CT2_ARGS = ("--engine", "ctranslate2", "--search", "engine", "--no-ct2-text")


@dataclass(frozen=True)
class Variant:
    """Another build of the checkpoint, measured in process (``local``) and served
    (``served``), on the sizes its flag (``flag``, the ``--...-sizes`` option's dest) names.
    ``search`` is how the in-process engine runs it: ``python`` (the served Python search over
    the step files), ``graph`` (ONNX Runtime's BeamSearch graph) or ``torch`` (the TorchScript
    search module); ``local`` None: served only, its twin a base engine (the ctranslate2
    build's is ``CTranslate2 int8``, the same library on the same conversion)."""

    flag: str
    local: str | None
    served: str
    search: str
    precision: str = "fp32"
    build_args: tuple[str, ...] = ()


# In the engines' order (the matrix rotates it per repeat; the report orders its own columns).
VARIANTS = {
    "graph": Variant("graph_sizes", IN_ENGINE, TRITON_GRAPH, "graph", "fp32", ORT_GRAPH_ARGS),
    "int8": Variant("int8_sizes", IN_PROCESS_INT8, TRITON_INT8, "python", INT8_PRECISION),
    "torch": Variant(
        "torch_generate_sizes", IN_PROCESS_TORCH, TRITON_TORCH, "torch", "fp32", TORCH_GENERATE_ARGS
    ),
    "torch-int8": Variant(
        "torch_int8_sizes",
        IN_PROCESS_TORCH_INT8,
        TRITON_TORCH_INT8,
        "torch",
        INT8_PRECISION,
        TORCH_GENERATE_ARGS,
    ),
    "ct2": Variant("ct2_sizes", None, TRITON_CT2, "ct2", "int8", CT2_ARGS),
    "ct2-text": Variant(
        "ct2_text_sizes",
        None,
        TRITON_CT2_TEXT,
        "ct2",
        "int8",
        ("--engine", "ctranslate2", "--search", "engine", "--ct2-text"),
    ),
}


@dataclass(frozen=True)
class Benchmarked:
    """One architecture as the benchmark measures it (``name``: the ``--architecture`` value).

    ``engines`` are measured on the default build; ``variants`` (keys of :data:`VARIANTS`)
    are the other builds it has; ``beside`` the architectures its run measures too, on its own
    engines (the recurrent model's run has the Transformer beside it, and writes the comparison
    report); ``label`` names it in that report; ``defaults`` are its run's flag defaults."""

    name: str
    label: str
    engines: tuple[str, ...]
    variants: tuple[str, ...]
    sizes: tuple[str, ...]
    defaults: Mapping[str, object]
    beside: tuple[str, ...] = ()

    def architecture(self) -> Architecture:
        """The build's architecture (imported on use: ``--help`` needs no model code)."""
        from triton_kit.build_engines.families.nmt.options import architecture

        return architecture(self.name)


NO_VARIANTS = {variant.flag: "" for variant in VARIANTS.values()}
BENCHMARKED = {
    "transformer": Benchmarked(
        "transformer",
        TRANSFORMER_LABEL,
        engines=(IN_PROCESS, CT2_FP32, CT2_INT8, TRITON),
        variants=tuple(VARIANTS),
        sizes=("tiny", "large"),
        defaults={
            "sizes": "tiny,large",
            "sentences_per_client": 12,
            "repeats": 3,
            "torch_generate_sizes": "tiny,large",
            "graph_sizes": "tiny",
            "torch_int8_sizes": "tiny",
            "int8_sizes": "tiny,large",
            "ct2_sizes": "tiny",  # --no-ct2-text: the python nmt in front of nmt_ct2
            # The default nmt build (its backend needs libsentencepiece-dev), measured where
            # named: benchmarks/results/nmt_ct2_text.md.
            "ct2_text_sizes": "",
            "output": RESULTS / "nmt.md",
        },
    ),
    "rnn": Benchmarked(
        "rnn",
        RNN_LABEL,
        engines=(IN_PROCESS, TRITON),
        variants=("torch", "torch-int8"),  # nmt_rnn_generate; no ONNX search graph, no CT2
        sizes=("tiny",),
        defaults={
            "sizes": "tiny",
            "sentences_per_client": 8,
            "repeats": 1,
            **NO_VARIANTS,
            "output": RESULTS / "nmt_rnn.md",
        },
        beside=("transformer",),
    ),
}
assert tuple(BENCHMARKED) == ARCHITECTURES
