"""What differs between the NMT architectures, behind one interface.

The build's steps are written once (:mod:`~triton_kit.build_engines.families.nmt.pipeline`,
:mod:`~triton_kit.build_engines.families.nmt.train`,
:mod:`~triton_kit.build_engines.families.nmt.export`,
:mod:`~triton_kit.build_engines.families.nmt.torch_search` and
:mod:`~triton_kit.build_engines.families.nmt.torchscript.generate`); each takes an
:class:`Architecture`, which holds only what differs: the model and its checkpoint, its ONNX step
graphs, its served model names, its decode rules, the reference its TorchScript search is checked
against, its traced steps and its training recipe.

Two are registered (:func:`triton_kit.build_engines.families.nmt.options.architecture`):
``transformer`` (Marian, :mod:`~triton_kit.build_engines.families.nmt.transformer`) and ``rnn``
(GRU + attention, :mod:`~triton_kit.build_engines.families.nmt.rnn.architecture`). This module
imports neither: the architectures import it, the steps import it and the registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from triton_kit.build_engines.families.nmt.corpus import Split
    from triton_kit.build_engines.families.nmt.defaults import ArchitectureDefault
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.build_engines.repository import ModelConfig
    from triton_kit.python_models.nmt.decode import DecodeSettings
    from triton_kit.python_models.nmt.settings import Limits

Axes = Mapping[str, Mapping[int, str]]
TOLERANCE = 1e-3  # the step graphs' max abs difference from PyTorch


@dataclass(frozen=True)
class Parity:
    """How far an architecture's exported step graphs are from its PyTorch model."""

    encoder_max_abs_diff: float
    decoder_max_abs_diff: float

    def check(self, tolerance: float = TOLERANCE) -> None:
        worst = max(self.encoder_max_abs_diff, self.decoder_max_abs_diff)
        if not worst <= tolerance:
            raise AssertionError(f"ONNX differs from PyTorch by {worst:.2e} (> {tolerance:g})")


@dataclass(frozen=True)
class ModelNames:
    """The served models of one architecture: the python BLS model, the step models it calls
    and the whole search in one engine (``--search engine``)."""

    bls: str
    encoder: str
    decoder: str
    generate: str

    @property
    def steps(self) -> tuple[str, str, str]:
        """``(bls, encoder, decoder)``, as :func:`repository.write_bls` takes them."""
        return (self.bls, self.encoder, self.decoder)


@dataclass(frozen=True)
class StepGraph:
    """One ONNX step graph to export: the module, a feed to trace it on, its tensor names and
    dynamic axes, and output dimensions to pin in the file afterwards."""

    module: nn.Module
    feeds: tuple[torch.Tensor, ...]
    inputs: Sequence[str]
    outputs: Sequence[str]
    input_axes: Axes
    output_axes: Axes
    pinned: Mapping[str, Mapping[int, int]] = field(default_factory=dict)


# Both encoders' tensors: the same names and input axes; only ``cross_kv``'s layout differs.
ENCODER_INPUTS, ENCODER_OUTPUTS = ("input_ids", "attention_mask"), ("last_hidden_state", "cross_kv")
ENCODER_AXES = {
    "input_ids": {0: "batch", 1: "src_len"},
    "attention_mask": {0: "batch", 1: "src_len"},
}


def encoder_graph(
    module: nn.Module,
    feeds: tuple[torch.Tensor, ...],
    cross_kv_axes: Mapping[int, str],
    pinned: Mapping[str, Mapping[int, int]] | None = None,
) -> StepGraph:
    """An encoder step graph: ``input_ids, attention_mask`` → ``last_hidden_state`` and
    ``cross_kv`` (its batch and source axes ``cross_kv_axes``)."""
    return StepGraph(
        module,
        feeds,
        ENCODER_INPUTS,
        ENCODER_OUTPUTS,
        ENCODER_AXES,
        {"last_hidden_state": {0: "batch", 1: "src_len"}, "cross_kv": cross_kv_axes},
        pinned or {},
    )


@dataclass(frozen=True)
class Verification:
    """The sentences a build checks its graphs and its search on: texts (``transformer``) or
    token ids (``rnn``), whichever the architecture's checks take."""

    sources: Sequence[Any]
    targets: Sequence[Any]
    # Whether ``targets`` are reference translations (the number models' held-out split);
    # False: another checkpoint's plain sentences, ``targets`` the sources again, for the
    # teacher-forced parity checks only (nothing to count exact translations against).
    references: bool = True


@dataclass(frozen=True)
class SearchBuild:
    """What a ``--search engine`` build has to check its TorchScript search with: the
    checkpoint, the verified ONNX step graphs, the decode settings, the verify sentences, each
    sentence's ``max_length``, the beam sizes and the build's thread count."""

    checkpoint: Path
    onnx: tuple[Path, Path]
    settings: DecodeSettings
    sentences: Verification
    max_length: int
    beams: Sequence[int]
    threads: int


@dataclass(frozen=True)
class SearchReference:
    """What the TorchScript search must give on the verify sentences: ``sources`` (token ids),
    ``expected`` ids per beam size, ``named`` (what names sentence ``i`` in an error), and how
    the check names the reference (``versus``: "vs HF generate"; ``name``: "HF generate")."""

    sources: Sequence[Sequence[int]]
    expected: Mapping[int, Sequence[Sequence[int]]]
    named: Sequence[Any]
    versus: str
    name: str


class TrainingRun(Protocol):
    """One architecture's training, driven by :func:`~triton_kit.build_engines.families.nmt.
    train.train` (which seeds, encodes, samples the batches and runs the optimiser steps)."""

    seed: int
    examples: int
    steps: int
    batch_size: int
    threads: int
    eval_every: int
    label_smoothing: float

    def corpus(self, output: Path) -> tuple[Any, Split, list[tuple[str, str]]]:
        """The tokenizer, the held-out split and the training pairs."""

    def model(
        self, tokenizer
    ) -> tuple[
        nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler | None, torch.device
    ]:
        """A fresh model on its training device, its optimiser and its rate schedule (stepped
        after each optimiser step), if any."""

    def before_step(self, optimizer: torch.optim.Optimizer, step: int) -> None: ...

    def logits(self, model: nn.Module, source, mask, decoder_input) -> torch.Tensor: ...

    def after_step(self, model: nn.Module) -> None: ...

    def valid_score(self, model: nn.Module, tokenizer, numbers: list[int]) -> float:
        """Greedy exact match (the model in eval mode)."""

    def save(self, model: nn.Module, tokenizer, output: Path, split: Split) -> None: ...


class Architecture(Protocol):
    """An NMT architecture, as the build's steps need it."""

    name: str  # the --architecture value
    default: ArchitectureDefault  # its build with --engine/--search left out (defaults.py)
    names: ModelNames
    default_checkpoint: Path  # the committed number model
    encoder_axes: Axes  # the step graphs' input axes (the dry run names them without export)
    decoder_axes: Axes
    torch_precisions: tuple[str, ...]  # what --engine torch --search engine builds

    def tokenizer_checkpoint(self, checkpoint: Path) -> Path:
        """Where the served tokenizer, split and generation rules come from."""

    def load(self, checkpoint: Path) -> nn.Module: ...

    def config_only(self, checkpoint: Path) -> Any:
        """What :meth:`decode_settings`, :meth:`limits` and the configs read, without weights."""

    def decode_settings(self, model) -> DecodeSettings: ...

    def limits(self, model, max_beam_size: int) -> Limits: ...

    def engine_search(self, options: BuildOptions, search: str) -> bool:
        """Whether the build writes the whole search as one engine; refuses, before any work,
        the builds the architecture has no engine for."""

    def writes_step_models(self, options: BuildOptions, generate: bool) -> bool:
        """Whether the encoder and decoder step models are written (else the BLS model alone,
        calling the search engine)."""

    def encoder_graph(self, model: nn.Module) -> StepGraph: ...

    def decoder_graph(self, model: nn.Module) -> StepGraph: ...

    def verification(self, checkpoint: Path, count: int) -> Verification: ...

    def compare(
        self,
        model: nn.Module,
        checkpoint: Path,
        onnx: tuple[Path, Path],
        sentences: Verification,
        threads: int,
    ) -> Parity:
        """The exported step graphs against the PyTorch model, teacher-forced."""

    def encoder_config(self, model, settings, bounds, options: BuildOptions) -> ModelConfig: ...

    def decoder_config(self, model, settings, bounds, options: BuildOptions) -> ModelConfig: ...

    def calibration_sources(
        self, checkpoint: Path, onnx: tuple[Path, Path], settings, bounds
    ) -> Mapping[str, Any]:
        """INT8 calibration data per step model (none: no INT8 calibration)."""

    def torch_sources(self, model: nn.Module) -> Mapping[str, Any]:
        """The PyTorch modules ``--engine torch`` scripts as step models (none: no such engine)."""

    def write_search_graph(self, out: Path, model, settings, options: BuildOptions) -> None:
        """Write the search as one ONNX graph (``--search engine`` with ONNX Runtime)."""

    def search_steps(
        self,
        model: nn.Module,
        settings: DecodeSettings,
        device: torch.device,
        dtype: torch.dtype,
        int8_dynamic: bool,
    ) -> tuple[torch.jit.ScriptModule, nn.Module]:
        """The encoder and the decoder step the TorchScript search calls (a
        :class:`~triton_kit.build_engines.families.nmt.torchscript.row_step.SearchStep`)."""

    def search_reference(self, build: SearchBuild) -> SearchReference:
        """What the TorchScript search must give on the build's verify sentences."""

    def training(self, steps: int | None) -> TrainingRun: ...
