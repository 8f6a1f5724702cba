"""Triton's own onnxruntime and pytorch backends, built from the 24.10 sources for the
embedded server, so it runs the same backend code as the official container; and, opt-in,
``pytorch_aoti`` (Triton's newer pytorch backend, for AOTInductor packages: ``aoti.py``) and
``ctranslate2`` (the kit's own C++ backend serving CTranslate2 models: ``ct2_backend.py``).

``python -m triton_kit.server.native_backends build`` builds the first two (``make backends``),
``... build pytorch_aoti`` / ``... build ctranslate2`` the opt-in ones; ``built_library`` hands
the launcher the ones that are built and current.
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
    "NativeBackendError",
    "built_library",
    "default_out",
]

NATIVE_BACKENDS = ("onnxruntime", "pytorch")  # built by default, from the r24.10 sources
# built only when named: aoti.py; ctranslate2, the kit's own backend (ct2_backend.py)
OPT_IN_BACKENDS = ("pytorch_aoti", "ctranslate2")
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
