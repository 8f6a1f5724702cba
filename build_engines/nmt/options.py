"""The nmt family's own build options, apart from the package so its steps can import them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from build_engines.nmt.train import DEFAULT_CHECKPOINT

DEFAULT_RNN_CHECKPOINT = DEFAULT_CHECKPOINT.parent / "nmt-rnn-en-fr-numbers"
ARCHITECTURES = ("transformer", "rnn")

DEFAULT_MAX_BEAM_SIZE = 16
# engine: the search inside ONNX Runtime (nmt_generate, --engine onnxruntime, fp32 or
# int8-dynamic); python: the numpy search over nmt_encoder/nmt_decoder (every engine).
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
    search: str = "engine"  # where the transformer's beam search runs, when the engine can

    @property
    def checkpoint_dir(self) -> Path:
        default = DEFAULT_RNN_CHECKPOINT if self.architecture == "rnn" else DEFAULT_CHECKPOINT
        return Path(self.checkpoint or default)
