"""What a native backend was built from, written beside it and checked before serving.

A backend library links one framework build (the venv's onnxruntime or torch); served
against another it crashes or fails to load with an unhelpful message, so the launcher
compares this record with what is installed now and names the rebuild command instead.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from triton_kit.server.native_backends.errors import NativeBackendError
from triton_kit.server.native_backends.frameworks import installed

RECORD_NAME = "build-info.json"
REBUILD_COMMAND = "make backends (python -m triton_kit.server.native_backends build)"
# Backends ``build`` leaves out unless named: their own command.
_OPT_IN_REBUILD = {
    "pytorch_aoti": "python -m triton_kit.server.native_backends build pytorch_aoti",
}


def rebuild_command(backend: str) -> str:
    return _OPT_IN_REBUILD.get(backend, REBUILD_COMMAND)


@dataclass(frozen=True)
class Provenance:
    backend: str
    library: str  # file name inside the backend's folder
    framework: str  # pip distribution the library links
    framework_version: str
    gpu: bool
    recipe: str  # sha256 of everything that decides the build: sources, patches, flags
    # ctranslate2 only: whether it was built with sentencepiece (its text mode). None for the
    # other backends and in records written before the field (``read`` takes those too).
    text_mode: bool | None = None

    def write(self, folder: Path) -> None:
        (folder / RECORD_NAME).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Provenance | None:
        path = folder / RECORD_NAME
        if not path.is_file():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (TypeError, ValueError):
            return None


def up_to_date(folder: Path, library: str, recipe: str) -> bool:
    """Whether ``folder`` holds ``library`` built from exactly ``recipe``."""
    existing = Provenance.read(folder)
    return existing is not None and existing.recipe == recipe and (folder / library).is_file()


def check_current(folder: Path, backend: str) -> Path:
    """The built library of ``backend`` in ``folder`` if it matches what is installed now."""
    record = Provenance.read(folder)
    if record is None or not (folder / record.library).is_file():
        raise NativeBackendError(
            f"Triton's {backend} backend is not built (no {folder / RECORD_NAME}): "
            f"run `{rebuild_command(backend)}`"
        )
    framework = installed(record.framework)
    if framework is None or framework.version != record.framework_version:
        now = framework.version if framework else "not installed"
        raise NativeBackendError(
            f"Triton's {backend} backend in {folder} was built against {record.framework} "
            f"{record.framework_version}, but {record.framework} here is {now}: "
            f"run `{rebuild_command(backend)}`"
        )
    return folder / record.library
