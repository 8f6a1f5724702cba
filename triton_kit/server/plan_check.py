"""Refuse to serve TensorRT plans that cannot load here, and say what to rebuild.

A plan deserialises only on the TensorRT version that built it and runs only on
the GPU compute capability it was built for. Triton would fail late, model by
model, with a terse deserialisation error; this check reads each plan's sidecar
first and names the command that rebuilds it on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from triton_kit.python_models.common.contracts import family_of
from triton_kit.python_models.common.tensorrt_sidecar import (
    SIDECAR_NAME,
    VERSION_COMPATIBLE_FLAG,
    Sidecar,
)
from triton_kit.server import tensorrt_device as device
from triton_kit.server.errors import PlanMismatchError
from triton_kit.server.tensorrt_device import Gpu, TensorRTRuntime, release

PLAN_PLATFORM = 'platform: "tensorrt_plan"'


@dataclass(frozen=True)
class PlanProblem:
    model: str
    version: str
    reason: str
    rebuild: str

    def __str__(self) -> str:
        return (
            f"model '{self.model}' version {self.version}: {self.reason}; "
            f"rebuild with: {self.rebuild}"
        )


def plan_models(repository: Path) -> list[Path]:
    """Model folders whose config.pbtxt declares a TensorRT plan."""
    found = []
    for config in sorted(Path(repository).glob("*/config.pbtxt")):
        text = config.read_text(errors="replace")
        if PLAN_PLATFORM in text or 'backend: "tensorrt"' in text:
            found.append(config.parent)
    return found


def find_problems(
    repository: Path, runtime=None, gpus=None, version_compatible_enabled: bool = False
) -> list[PlanProblem]:
    """Every plan in ``repository`` that this TensorRT/GPU cannot serve (empty: all fine).

    ``runtime`` and ``gpus`` default to what this machine shows (for tests, pass them);
    ``version_compatible_enabled``: the server runs with
    ``--backend-config=tensorrt,version-compatible=true``."""
    models = plan_models(repository)
    if not models:
        return []
    runtime = runtime if runtime is not None else device.tensorrt_runtime()
    gpus = gpus if gpus is not None else device.visible_gpus()
    problems = []
    for model_dir in models:
        for version_dir in sorted(p for p in model_dir.iterdir() if p.name.isdigit()):
            sidecar_path = version_dir / SIDECAR_NAME
            if not sidecar_path.exists():
                problems.append(
                    PlanProblem(
                        model_dir.name,
                        version_dir.name,
                        f"no {SIDECAR_NAME} beside the plan, so its TensorRT version and GPU "
                        "are unknown",
                        f"python -m triton_kit.build_engines {family_of(model_dir.name)} "
                        "--engine tensorrt",
                    )
                )
                continue
            sidecar = Sidecar.read(sidecar_path)
            reasons = (
                tensorrt_mismatch(sidecar, runtime, version_compatible_enabled),
                gpu_mismatch(sidecar, gpus),
            )
            for reason in reasons:
                if reason:
                    problems.append(
                        PlanProblem(
                            model_dir.name, version_dir.name, reason, sidecar.rebuild_command
                        )
                    )
    return problems


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


def check_plans(
    repository: Path, runtime=None, gpus=None, version_compatible_enabled: bool = False
) -> None:
    """Raise :class:`PlanMismatchError` listing every plan that cannot be served here."""
    problems = find_problems(repository, runtime, gpus, version_compatible_enabled)
    if problems:
        raise PlanMismatchError(
            "TensorRT plans in "
            f"{repository} do not match this machine:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + "\nRebuild them on the serving machine (inside the serving image), or serve the "
            "ONNX models instead: python -m triton_kit.build_engines <family> --engine onnxruntime"
        )
