"""The ``ctranslate2`` backend: the kit's own C++ Triton backend (``ctranslate2/`` beside this
file) serving CTranslate2 sequence-to-sequence models natively (issue 31): the default ``nmt``
build's ``nmt`` itself, in its text mode, so ``make backends`` builds it with Triton's own two.

It compiles against the CTranslate2 public headers vendored in ``third_party/ctranslate2``
(sha256-checked; its README says which release and why) and links the ``libctranslate2``
shipped in this environment's ``ctranslate2`` PyPI wheel, with the wheel's C++ ABI. The r24.10
core/common/backend sources, CMake flags, install and provenance are the other native
backends' (``build.py``).

Where the system's sentencepiece library is installed (Debian ``libsentencepiece-dev``,
``scripts/install-system-deps.sh``) the backend gets its text mode (a ``source_spm`` parameter:
``TEXT`` in, ``TRANSLATION`` out, ``ctranslate2/src/text.h``), which the default ``nmt`` build
is; without it the backend builds without the text mode, the build says so loudly on stderr
(:data:`NO_TEXT_MODE`), and a text-mode model (the default ``nmt``) refuses to load, naming the
package. Nothing falls back to another layout.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from triton_kit.server.native_backends import frameworks
from triton_kit.server.native_backends.build import (
    BuildSettings,
    compile_backend,
    install_library,
    require_tools,
    shared_cmake_args,
)
from triton_kit.server.native_backends.errors import NativeBackendError
from triton_kit.server.native_backends.provenance import Provenance, up_to_date
from triton_kit.server.native_backends.sources import SOURCES, sha256_of

CT2_BACKEND = "ctranslate2"
LIBRARY = "libtriton_ctranslate2.so"
TARGET = "triton-ctranslate2-backend"
SOURCE_DIR = Path(__file__).resolve().parent / "ctranslate2"
_PROJECT_ROOT = Path(__file__).resolve().parents[3]
HEADERS = _PROJECT_ROOT / "third_party" / "ctranslate2"
# The release the vendored headers come from (third_party/ctranslate2/README.md): the structs
# the backend fills are laid out by them, so the linked library must be the same release
# (pyproject.toml pins the wheel to it).
HEADERS_RELEASE = "4.8.1"
SENTENCEPIECE_PACKAGE = "libsentencepiece-dev"
# Printed (stderr) by every build of the backend where pkg-config finds no sentencepiece.
NO_TEXT_MODE = (
    f"WARNING: {CT2_BACKEND}: built WITHOUT its text mode: no sentencepiece found by pkg-config. "
    f"The default nmt (python -m triton_kit.build_engines nmt) IS this backend's text mode and "
    f"will refuse to load. Install {SENTENCEPIECE_PACKAGE} (and pkg-config): "
    f"scripts/install-system-deps.sh, or make system-deps; then rebuild: python -m "
    f"triton_kit.server.native_backends build {CT2_BACKEND}. Or build nmt with --no-ct2-text "
    f"(a python nmt in front of nmt_ct2, no sentencepiece in the backend)."
)


# A symbol only a backend built with sentencepiece references (text.cc's text mode).
TEXT_MODE_SYMBOL = b"sentencepiece22SentencePieceProcessor"


def has_text_mode(library: Path) -> bool:
    """Whether the built backend ``library`` has the text mode (was linked with sentencepiece).

    Its build record beside it (``build-info.json``, ``text_mode``) says so; a record written
    before that field, or none, falls back to scanning ``library`` for :data:`TEXT_MODE_SYMBOL`.
    """
    library = Path(library)
    record = Provenance.read(library.parent)
    if record is not None and record.backend == CT2_BACKEND and record.text_mode is not None:
        return record.text_mode
    return TEXT_MODE_SYMBOL in library.read_bytes()


def text_mode_missing(library: Path, models: list[str]) -> str:
    """The one line the launcher refuses to start with where ``models`` (text-mode models, the
    default ``nmt``) need the text mode that ``library`` lacks."""
    return (
        f"the kit's {CT2_BACKEND} backend ({library}) was built without its text mode (no "
        f"{SENTENCEPIECE_PACKAGE} when it was built), which {', '.join(models)} needs (the "
        f"default nmt build is that text mode): install {SENTENCEPIECE_PACKAGE} "
        f"(scripts/install-system-deps.sh) and rebuild the backend (python -m "
        f"triton_kit.server.native_backends build {CT2_BACKEND}), or build nmt with "
        f"--no-ct2-text"
    )


def warn_without_text_mode(spm: str | None) -> None:
    """The loud line :data:`NO_TEXT_MODE` on stderr where ``spm`` (the sentencepiece version
    the backend is built with) is None."""
    import sys

    if spm is None:
        print(NO_TEXT_MODE, file=sys.stderr)


def check_release(framework: frameworks.Framework) -> None:
    """Refuse a ctranslate2 wheel of another release than the headers'."""
    if framework.version != HEADERS_RELEASE:
        raise NativeBackendError(
            f"ctranslate2 {framework.version} is installed, but the backend's headers are "
            f"v{HEADERS_RELEASE} (third_party/ctranslate2): install ctranslate2=="
            f"{HEADERS_RELEASE} (pip install '.[serve]' pins it)"
        )


def check_headers(folder: Path = HEADERS) -> str:
    """The vendored headers' SHA256SUMS, after checking every file against it."""
    sums = folder / "SHA256SUMS"
    if not sums.is_file():
        raise NativeBackendError(f"{sums} is missing: the CTranslate2 headers are not vendored")
    text = sums.read_text()
    for line in text.splitlines():
        digest, name = line.split(maxsplit=1)
        path = folder / name
        if not path.is_file() or sha256_of(path) != digest:
            raise NativeBackendError(f"{path} does not match {sums}: refusing to build")
    return text


def sentencepiece_version() -> str | None:
    """The system sentencepiece library's version (pkg-config), None where it is not
    installed: then the backend builds without its text mode."""
    if shutil.which("pkg-config") is None:
        return None
    done = subprocess.run(
        ["pkg-config", "--modversion", "sentencepiece"],
        capture_output=True,
        text=True,
        check=False,
    )
    version = done.stdout.strip()
    return version if done.returncode == 0 and version else None


def recipe_key(
    framework: frameworks.Framework, library: Path, args: list[str], server_library: str | None
) -> str:
    """sha256 of what decides the build: the backend's sources, the headers, the wheel's
    library, the shared Triton sources, the CMake flags and the server library's name."""
    own = sorted(p for p in SOURCE_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    content = {
        "sources": {str(p.relative_to(SOURCE_DIR)): sha256_of(p) for p in own},
        "headers": hashlib.sha256(check_headers().encode()).hexdigest(),
        "framework": [framework.distribution, framework.version, str(library)],
        "triton": {name: SOURCES[name].commit for name in ("core", "common", "backend")},
        "cmake": args,
        "tritonserver_library": server_library,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def build_ctranslate2(settings: BuildSettings, log: Callable[[str], None] = print) -> Path:
    """Build ``ctranslate2`` into ``settings.out/ctranslate2/`` unless an identical build is
    there; the library's path."""
    framework = frameworks.require("ctranslate2")
    check_release(framework)
    library = frameworks.ctranslate2_library(framework)
    abi = int(frameworks.cxx11_abi(library))
    spm = sentencepiece_version()
    args = [
        *shared_cmake_args(settings.work, gpu=False),
        f"-DCT2_INCLUDE_DIR={HEADERS / 'include'}",
        f"-DCT2_LIBRARY={library}",
        f"-DCT2_CXX11_ABI={abi}",
        f"-DCT2_SENTENCEPIECE={'ON' if spm else 'OFF'}",
    ]
    # The wheel's other libraries (libgomp-<hash>): 4.8.1's libctranslate2 has no rpath of its
    # own to find them by, so the backend NEEDs them (part of the key: they are linked in).
    bundled = tuple(sorted(p.name for p in library.parent.glob("*.so*") if p != library))
    key = recipe_key(
        framework, library, [*args, *bundled, f"sentencepiece={spm}"], settings.tritonserver_library
    )
    folder = settings.out / CT2_BACKEND
    if not settings.force and up_to_date(folder, LIBRARY, key):
        log(f"{CT2_BACKEND}: up to date ({folder / LIBRARY})")
        existing = Provenance.read(folder)
        if existing is not None and existing.text_mode is None:  # a record from before the field
            replace(existing, text_mode=spm is not None).write(folder)
        warn_without_text_mode(spm)
        return folder / LIBRARY
    require_tools(CT2_BACKEND)
    started = time.monotonic()
    log(
        f"{CT2_BACKEND}: building the kit's backend against {library.name} (ctranslate2 "
        f"{framework.version}, _GLIBCXX_USE_CXX11_ABI={abi}; text mode: "
        + (f"sentencepiece {spm})" if spm else "off, no libsentencepiece-dev)")
    )
    build_dir = compile_backend(CT2_BACKEND, SOURCE_DIR, TARGET, args, settings)
    built = install_library(
        build_dir / LIBRARY,
        folder / LIBRARY,
        settings.tritonserver_library,
        library.parent,
        add_needed=bundled,
    )
    Provenance(
        CT2_BACKEND,
        LIBRARY,
        framework.distribution,
        framework.version,
        False,
        key,
        text_mode=spm is not None,
    ).write(folder)
    log(f"{CT2_BACKEND}: built {built} in {time.monotonic() - started:.0f} s")
    warn_without_text_mode(spm)
    return built
