"""The nmt family's own build options, apart from the package so its steps can import them,
and the architectures ``--architecture`` names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triton_kit.build_engines.families.nmt.defaults import ArchitectureDefault, default_of

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
# backend with --engine torch at fp32, fp16 or int8-dynamic (CPU only); the whole model in
# CTranslate2 with --engine ctranslate2 (nmt_ct2, the kit's ctranslate2 backend), which has no
# other; for --architecture rnn nmt_rnn_generate, TorchScript with --engine torch at fp32 or
# int8-dynamic); python: the numpy search over the step models (every engine but ctranslate2,
# and torch for the RNN).
SEARCHES = ("engine", "python")


@dataclass(frozen=True)
class NmtOptions:
    """The nmt flags, typed (defaults written only here and, per architecture, in defaults.py)."""

    architecture: str = "transformer"
    checkpoint: Path | None = None  # None: the committed number model of the architecture
    train: bool = False
    train_steps: int | None = None  # None: the training settings' own
    max_beam_size: int = DEFAULT_MAX_BEAM_SIZE
    verify_sentences: int = 16
    # Where the beam search runs; None: the architecture's default for the build's engine
    # (:meth:`search_for`, defaults.py). The Transformer's default is CTranslate2's
    # search; the Python search over step models stays with --engine onnxruntime|torch|tensorrt
    # (ONNX Runtime 1.32's BeamSearch operator cannot batch sentences, and served it ran
    # 0.59-0.95x the Python search: benchmarks/results/nmt_engine_search.md; the TorchScript
    # search batches but ran slower than the Python search on the 2-core CPU:
    # benchmarks/results/nmt.md; on the H100 the two serve about equally: gpu_nmt.md).
    search: str | None = None
    # --ct2-text (with --engine ctranslate2): ``nmt`` itself is the ctranslate2 backend's text
    # model (tokenising in C++), no python model and no nmt_ct2 (families/nmt/ct2_engine.py);
    # --no-ct2-text: the python ``nmt`` in front of ``nmt_ct2``. None: the architecture's
    # default for the build's engine (:meth:`ct2_text_for`, defaults.py).
    ct2_text: bool | None = None

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.checkpoint or architecture(self.architecture).default_checkpoint)

    @property
    def default(self) -> ArchitectureDefault:
        return default_of(self.architecture)

    def search_for(self, engine: str) -> str:
        """The search this build runs with ``engine`` (an ``--engine`` value)."""
        return self.search or self.default.search_for(engine)

    def ct2_text_for(self, engine: str) -> bool:
        """Whether ``nmt`` is the ctranslate2 backend's text model with ``engine``."""
        if self.ct2_text is not None:
            return self.ct2_text
        return self.default.ct2_text_for(engine)
