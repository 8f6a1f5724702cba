"""The record beside every plan, and the check that a plan fits the TensorRT and GPU at hand.

A plan deserialises only on the TensorRT version that built it (unless built
version-compatible) and runs only on the GPU compute capability it was built
for (unless built hardware-compatible). Standard library only: the server
launcher imports this.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from build_engines.tensorrt.device import Gpu, TensorRTRuntime, release
from python_models.tensorrt_sidecar import SIDECAR_NAME, VERSION_COMPATIBLE_FLAG

__all__ = ["SIDECAR_NAME", "Sidecar", "gpu_mismatch", "tensorrt_mismatch"]


@dataclass(frozen=True)
class Sidecar:
    model: str
    family: str
    tensorrt_version: str
    gpu_name: str
    compute_capability: str
    precision: str
    onnx_sha256: str
    profiles: list[dict[str, dict[str, list[int]]]]
    build_options: dict[str, object]
    rebuild_command: str
    built_at: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Sidecar:
        return cls(**json.loads(text))

    @classmethod
    def read(cls, path: Path) -> Sidecar:
        return cls.from_json(Path(path).read_text())


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in (release(version) or "0.0.0").split("."))


def tensorrt_mismatch(
    sidecar: Sidecar, runtime: TensorRTRuntime, version_compatible_enabled: bool = False
) -> str | None:
    """Why this TensorRT (and Triton's backend config) cannot load the plan, or None.

    Versions compare normalised (major.minor.patch): "10.8.0.43" from a PyPI build is the
    "10.8.0" that libnvinfer reports."""
    built = release(sidecar.tensorrt_version) or sidecar.tensorrt_version
    if sidecar.build_options.get("version_compatible") and not version_compatible_enabled:
        return (
            "version-compatible plan: Triton must be started with "
            f"{VERSION_COMPATIBLE_FLAG} (docker-compose.yml adds it when the repository needs it)"
        )
    if runtime.version is None:
        return f"built with TensorRT {built}, but no TensorRT is visible here ({runtime.source})"
    if release(runtime.version) == built:
        return None
    if sidecar.build_options.get("version_compatible"):
        # Version-compatible plans (8.6+) load on the same or a later runtime.
        if _version_tuple(runtime.version) >= _version_tuple(built):
            return None
        return f"version-compatible plan built with TensorRT {built} needs {built} or later"
    return (
        f"built with TensorRT {built}, but this server has TensorRT {runtime.version} "
        f"({runtime.source})"
    )


def gpu_mismatch(sidecar: Sidecar, gpus: list[Gpu]) -> str | None:
    """Why these GPUs cannot run the plan, or None."""
    if sidecar.build_options.get("dla_core") is not None:
        return None  # DLA targets (Jetson) are checked by TensorRT itself at load time
    if not gpus:
        return f"built for {sidecar.gpu_name} (compute {sidecar.compute_capability}); no GPU here"
    level = sidecar.build_options.get("hardware_compatibility_level", "none")
    wrong = [g for g in gpus if not _gpu_fits(sidecar.compute_capability, g, level)]
    if not wrong:
        return None
    seen = ", ".join(f"{g.name} (compute {g.compute_capability})" for g in wrong)
    return (
        f"built for {sidecar.gpu_name} (compute {sidecar.compute_capability}, hardware "
        f"compatibility {level}), but this server has {seen}"
    )


def _gpu_fits(built_cc: str, gpu: Gpu, level: object) -> bool:
    if level == "ampere+":
        return _version_tuple(gpu.compute_capability) >= (8, 0)
    return gpu.compute_capability == built_cc
