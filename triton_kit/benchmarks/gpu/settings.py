"""The options of one triton_kit/benchmarks/gpu/run.py run, parsed once (defaults here only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FAMILY_NAMES = ("resnet50", "bert-base", "bert-large")
ROW_NAMES = ("input", "shm", "minilm")


@dataclass(frozen=True)
class Settings:
    out: Path
    device: str = "cuda"
    seconds: float = 5.0
    processes: int = 8
    families: tuple[str, ...] = FAMILY_NAMES
    rows: tuple[str, ...] = ROW_NAMES
    quick: bool = False
    smoke: bool = False
    tokenizer: Path | None = None  # tokenizer.json for the MiniLM shape (default checkpoint's)
    # Load before each measured window, not timed: eager TorchScript pays first-use costs
    # (cuDNN/cuBLAS plans, allocator growth) at every new batch size the batcher forms.
    warmup: float = 2.0

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    @property
    def half(self) -> bool:
        """FP16 on the GPU; FP32 on CPU (half convolutions there are slow or missing)."""
        return self.gpu

    def concurrency(self, wanted: int) -> int:
        """Client concurrency: the smoke run keeps 2 users (2 CPU cores)."""
        return min(wanted, 2) if self.smoke else wanted
