"""Edits the r24.10 sources need to build outside NVIDIA's build container.

Each edit names the text it replaces; a source that no longer holds that text fails the
build loudly (a silent no-op would build something other than what was verified).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from triton_kit.server.native_backends.errors import NativeBackendError


@dataclass(frozen=True)
class Patch:
    path: str  # relative to the sources folder
    old: str
    new: str
    why: str
    gpu_only: bool = False


PATCHES: dict[str, tuple[Patch, ...]] = {
    "common": (
        Patch(
            "common/src/CMakeLists.txt",
            "add_subdirectory(test)",
            "# add_subdirectory(test)  (triton-kit: the tests want googletest)",
            "common's unconditional test folder downloads googletest",
        ),
    ),
    "backend": (
        Patch(
            "backend/CMakeLists.txt",
            '"53;60-real;62-real;70-real;72-real;75-real;',
            '"75-real;',
            "CUDA 13's nvcc refuses architectures below 75",
            gpu_only=True,
        ),
    ),
    "pytorch_backend": (
        Patch(
            "pytorch_backend/CMakeLists.txt",
            "find_package(Python3 REQUIRED COMPONENTS Development.Module)",
            "# find_package(Python3 ...)  (triton-kit: torch's C++ headers do not need Python.h)",
            "the machines here have no Python headers, and the C++ API does not use them",
        ),
        Patch(
            "pytorch_backend/src/libtorch.cc",
            '#include "libtorch_utils.h"',
            '#include "libtorch_utils.h"\n'
            "#ifdef TRITON_ENABLE_GPU\n#include <torch/cuda.h>\n#endif",
            "torch::cuda::device_count() needs <torch/cuda.h> with recent torch headers",
            gpu_only=True,
        ),
    ),
}


def apply(sources: Path, names: list[str], gpu: bool) -> None:
    for name in names:
        for patch in PATCHES.get(name, ()):
            if patch.gpu_only and not gpu:
                continue
            target = sources / patch.path
            text = target.read_text()
            if patch.old not in text:
                raise NativeBackendError(
                    f"{patch.path} no longer contains {patch.old!r} ({patch.why}): "
                    "are these the pinned r24.10 sources?"
                )
            target.write_text(text.replace(patch.old, patch.new, 1))
