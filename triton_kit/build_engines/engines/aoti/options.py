"""What the AOTInductor engine reads from the environment, parsed once."""

from __future__ import annotations

import os
from dataclasses import dataclass

CXX_ENV = "TRITON_KIT_AOTI_CXX"


@dataclass(frozen=True)
class AotiOptions:
    """``cxx``: Inductor's C++ compiler for the package (None: its own choice, $CXX or g++).
    On the H100 machine the image's compiler linked libstdc++ statically into the package,
    which then crashed; ``TRITON_KIT_AOTI_CXX=/usr/bin/g++`` built one that ran
    (triton_kit/benchmarks/gpu/aoti.py, benchmarks/results/gpu_aoti.md)."""

    cxx: str | None = None

    @classmethod
    def from_environment(cls) -> AotiOptions:
        return cls(cxx=os.environ.get(CXX_ENV) or None)
