"""Import TensorRT only when a plan is really built, with a message that says how to get it."""

from __future__ import annotations

import importlib
from types import ModuleType

from triton_kit.build_engines.steps import BuildError

INSTALL_HINT = (
    "TensorRT is not installed here (no `tensorrt` Python package). Build plans where it exists:\n"
    "  - the compose service: COMPOSE_PROFILES=gpu docker compose run --rm build-engines "
    "<family> --engine tensorrt ...  (TensorRT 10.5, the same as the Triton 24.10 server), or\n"
    "  - the official container nvcr.io/nvidia/tensorrt:<yy.mm>-py3 (or tritonserver:<yy.mm>-py3 "
    "plus `pip install tensorrt-cu12==<its TensorRT>`) on the GPU that will serve the plan.\n"
    "`--dry-run` prints the plan of work and the equivalent trtexec command without TensorRT."
)


class TensorRTUnavailable(BuildError):
    """``--engine tensorrt`` was asked for where TensorRT cannot be imported."""


def import_tensorrt() -> ModuleType:
    try:
        return importlib.import_module("tensorrt")
    except ImportError as exc:
        raise TensorRTUnavailable(f"{INSTALL_HINT}\n(import tensorrt: {exc})") from exc


def tensorrt_available() -> bool:
    try:
        import_tensorrt()
    except TensorRTUnavailable:
        return False
    return True


def major_version(trt: ModuleType) -> int:
    return int(str(trt.__version__).split(".")[0])
