"""The ``--engine aoti`` options (``--aoti-cxx``), parsed once into a frozen value."""

from __future__ import annotations

from dataclasses import dataclass

CXX_ENV = "TRITON_KIT_AOTI_CXX"  # the default of --aoti-cxx (the GPU run's scripts set it)


@dataclass(frozen=True)
class AotiOptions:
    """``cxx``: Inductor's C++ compiler for the package (None: its own choice, $CXX or g++).
    On the H100 machine the image's compiler linked libstdc++ statically into the package,
    which then crashed; ``/usr/bin/g++`` built one that ran (triton_kit/benchmarks/gpu/aoti/,
    benchmarks/results/gpu_aoti.md)."""

    cxx: str | None = None
