"""Triton's own onnxruntime and pytorch backends, built from the 24.10 sources for the
embedded server, so it runs the same backend code as the official container; ``ctranslate2``
(the kit's own C++ backend serving CTranslate2 models: ``ct2_backend.py``), which serves the
default ``nmt`` (its text mode: libsentencepiece-dev); and, opt-in, ``pytorch_aoti`` (Triton's
newer pytorch backend, for AOTInductor packages: ``aoti.py``).

``python -m triton_kit.server.native_backends build`` builds the first three (``make
backends``), ``... build pytorch_aoti`` the opt-in one; ``built_library`` hands the launcher the
ones that are built and current.
"""

from __future__ import annotations

import os
from pathlib import Path

from triton_kit.server.native_backends.errors import NativeBackendError
from triton_kit.server.native_backends.provenance import REBUILD_COMMAND, check_current

__all__ = [
    "NATIVE_BACKENDS",
    "OPT_IN_BACKENDS",
    "REBUILD_COMMAND",
    "SERVED_BACKENDS",
    "TRITON_BACKENDS",
    "NativeBackendError",
    "built_library",
    "default_out",
]

# Built by default: Triton's own two, from the r24.10 sources, and the kit's own ctranslate2
# (ct2_backend.py), which serves the default nmt build (its text mode: libsentencepiece-dev).
NATIVE_BACKENDS = ("onnxruntime", "pytorch", "ctranslate2")
TRITON_BACKENDS = ("onnxruntime", "pytorch")  # of those, Triton's own (r24.10)
OPT_IN_BACKENDS = ("pytorch_aoti",)  # built only when named: aoti.py
SERVED_BACKENDS = NATIVE_BACKENDS + OPT_IN_BACKENDS  # what the launcher adds where built
OUT_ENV = "TRITON_KIT_NATIVE_BACKENDS"


def default_out() -> Path:
    """``build/triton-backends`` in the checkout, or $TRITON_KIT_NATIVE_BACKENDS."""
    from_env = os.environ.get(OUT_ENV)
    return (
        Path(from_env)
        if from_env
        else Path(__file__).resolve().parents[3] / "build" / ("triton-backends")
    )


def built_library(backend: str, out: Path | None = None) -> Path:
    """The built library of ``backend``; NativeBackendError naming the fix if absent/stale."""
    return check_current((out or default_out()) / backend, backend)
