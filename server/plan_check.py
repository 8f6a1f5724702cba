"""Refuse to serve TensorRT plans that cannot load here, and say what to rebuild.

A plan deserialises only on the TensorRT version that built it and runs only on
the GPU compute capability it was built for. Triton would fail late, model by
model, with a terse deserialisation error; this check reads each plan's sidecar
first and names the command that rebuilds it on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from python_models.contracts import family_of
from python_models.tensorrt_sidecar import SIDECAR_NAME
from server.errors import PlanMismatchError

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
    from build_engines.tensorrt import device
    from build_engines.tensorrt.sidecar import Sidecar, gpu_mismatch, tensorrt_mismatch

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
                        f"python -m build_engines {family_of(model_dir.name)} --engine tensorrt",
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
            "ONNX models instead: python -m build_engines <family> --engine onnxruntime"
        )
