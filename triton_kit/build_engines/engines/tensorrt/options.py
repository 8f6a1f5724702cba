"""Build options for a TensorRT plan in one frozen value (defaults written only here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

HARDWARE_LEVELS = ("none", "ampere+", "same-compute-capability")
PROFILING_VERBOSITY = ("layer_names_only", "detailed", "none")


@dataclass(frozen=True)
class TensorRTOptions:
    """Everything that changes the plan besides the ONNX and the profiles (recorded in sidecars)."""

    workspace_gb: float = 4.0
    builder_optimization_level: int = 3
    sparsity: bool = False
    version_compatible: bool = False
    hardware_compatibility_level: str = "none"
    dla_core: int | None = None
    timing_cache: Path | None = None
    profiling_verbosity: str = "layer_names_only"
    cuda_graphs: bool = False
    gather_kernel_buffer_threshold: int = 0
    warmup: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.builder_optimization_level <= 5:
            raise ValueError("builder optimisation level must be 0..5")
        if self.hardware_compatibility_level not in HARDWARE_LEVELS:
            raise ValueError(f"hardware compatibility level must be one of {HARDWARE_LEVELS}")
        if self.profiling_verbosity not in PROFILING_VERBOSITY:
            raise ValueError(f"profiling verbosity must be one of {PROFILING_VERBOSITY}")
        if self.workspace_gb <= 0:
            raise ValueError("workspace must be positive")
        if self.dla_core is not None and self.hardware_compatibility_level != "none":
            raise ValueError("DLA plans cannot be hardware-compatible across GPUs")

    @property
    def workspace_bytes(self) -> int:
        return int(self.workspace_gb * 2**30)

    def as_record(self) -> dict[str, object]:
        """JSON-ready, for the sidecar."""
        record = asdict(self)
        record["timing_cache"] = str(self.timing_cache) if self.timing_cache else None
        return record
