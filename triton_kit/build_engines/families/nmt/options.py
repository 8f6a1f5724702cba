"""The nmt family's own build options, apart from the package so its steps can import them,
and the architectures ``--architecture`` names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Architecture

ARCHITECTURES = ("transformer", "rnn")


def architecture(name: str) -> Architecture:
    """The registered architecture ``name`` (one of :data:`ARCHITECTURES`), imported on use: the
    flags need only the names."""
    if name == "transformer":
        from triton_kit.build_engines.families.nmt.transformer import TRANSFORMER

        return TRANSFORMER
    if name == "rnn":
        from triton_kit.build_engines.families.nmt.rnn.architecture import RNN

        return RNN
    raise ValueError(f"unknown NMT architecture {name!r}: one of {', '.join(ARCHITECTURES)}")


DEFAULT_MAX_BEAM_SIZE = 16
# engine: the search inside the engine (nmt_generate: ONNX Runtime's BeamSearch with
# --engine onnxruntime at fp32 or int8-dynamic; TorchScript served by Triton's pytorch
# backend with --engine torch at fp32, fp16 or int8-dynamic (CPU only); for --architecture
# rnn nmt_rnn_generate, TorchScript with --engine torch at fp32 or int8-dynamic); python:
# the numpy search over the step models (every engine but torch for the RNN).
SEARCHES = ("engine", "python")


@dataclass(frozen=True)
class NmtOptions:
    """The nmt flags, typed (defaults written only here)."""

    architecture: str = "transformer"
    checkpoint: Path | None = None  # None: the committed number model of the architecture
    train: bool = False
    train_steps: int | None = None  # None: the training settings' own
    max_beam_size: int = DEFAULT_MAX_BEAM_SIZE
    verify_sentences: int = 16
    # Where the transformer's beam search runs. "python" by default, chosen by measurement:
    # ONNX Runtime 1.32's BeamSearch operator cannot batch sentences (its done-check reads a
    # neighbour's scores), so its graph loops over a batch's rows one sentence at a time, and
    # served it ran 0.59-0.95x today's search (benchmarks/results/nmt_engine_search.md); the
    # TorchScript search (--engine torch) batches
    # and is served as fast as in process, but runs slower than the Python search over the
    # ONNX Runtime step models on the 2-core CPU (benchmarks/results/nmt.md); on the H100 the
    # two searches over fp16 TorchScript steps serve about equally (gpu_nmt.md).
    search: str = "python"
    # --ct2-text (with --engine ctranslate2): ``nmt`` itself is the ctranslate2 backend's text
    # model (tokenising in C++), no python model and no nmt_ct2 (families/nmt/ct2_engine.py).
    ct2_text: bool = False

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.checkpoint or architecture(self.architecture).default_checkpoint)
