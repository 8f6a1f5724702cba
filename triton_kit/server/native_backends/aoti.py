"""The opt-in ``pytorch_aoti`` backend: Triton's newer pytorch backend, which serves
AOTInductor packages (``platform: "torch_aoti"``, ``model.pt2``), for the Triton 2.51 the kit
embeds (issue 30).

Triton 2.51 refuses platform ``torch_aoti`` for backend ``pytorch`` but loads any platform for
a backend name it does not know, so this library is installed under its own name beside the
r24.10 ``pytorch`` backend, which keeps serving TorchScript. The recipe itself (pinned archives
in ``third_party/triton-aoti``, the two-line fix to the PT2 path's batched outputs, CMake) is
``scripts/gpu/aoti_backend.sh``, the one implementation the GPU run also calls; this module runs
it, installs the library where the launcher's backend directory picks it up, and records its
provenance like the other native backends.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from triton_kit.server.native_backends import frameworks
from triton_kit.server.native_backends.errors import NativeBackendError
from triton_kit.server.native_backends.provenance import Provenance

AOTI_BACKEND = "pytorch_aoti"
LIBRARY = "libtriton_pytorch_aoti.so"
_PROJECT_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = _PROJECT_ROOT / "scripts" / "gpu" / "aoti_backend.sh"
PATCH_SOURCES = _PROJECT_ROOT / "scripts" / "gpu" / "pytorch_aoti"  # files the script copies in
ARCHIVES = _PROJECT_ROOT / "third_party" / "triton-aoti"
# What the script reads from the environment: each decides what gets built.
SCRIPT_ENV = (
    "TRITON_KIT_AOTI_SOURCES",
    "TRITON_KIT_AOTI_CXX",
    "CXX",
    "TRITON_KIT_AOTI_BUILD_TYPE",
    "TRITON_KIT_AOTI_BACKEND_UTILS",
    "CUDA_ARCH_LIST",
)
TOOLS = ("bash", "cmake", "ninja", "patchelf")


def recipe_key(framework: frameworks.Framework, server_library: str | None) -> str:
    """sha256 of everything that decides the build: the script and the sources it copies in,
    the pinned archives' sums, the torch it links, the environment the script reads and the
    server library's name."""
    sums = Path(os.environ.get("TRITON_KIT_AOTI_SOURCES") or ARCHIVES) / "SHA256SUMS"
    content = {
        "script": hashlib.sha256(SCRIPT.read_bytes()).hexdigest(),
        "patch_sources": {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(PATCH_SOURCES.glob("*"))
        },
        "archives": sums.read_text() if sums.is_file() else None,
        "framework": [framework.distribution, framework.version, str(framework.package_dir)],
        "env": {name: os.environ.get(name) for name in SCRIPT_ENV},
        "tritonserver_library": server_library,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def build_aoti(
    out: Path,
    *,
    carry: Path,
    force: bool = False,
    server_library: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Build ``pytorch_aoti`` into ``out/pytorch_aoti/`` unless an identical build is there.

    ``carry`` is the folder holding ``triton-src`` (read only by the script's
    ``TRITON_KIT_AOTI_BACKEND_UTILS=r24.10`` variant)."""
    framework = frameworks.require("torch")
    key = recipe_key(framework, server_library)
    folder = out / AOTI_BACKEND
    existing = Provenance.read(folder)
    unchanged = existing is not None and existing.recipe == key
    if unchanged and not force and (folder / LIBRARY).is_file():
        log(f"{AOTI_BACKEND}: up to date ({folder / LIBRARY})")
        return folder / LIBRARY
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise NativeBackendError(
            f"cannot build Triton's {AOTI_BACKEND} backend: {', '.join(missing)} not found; "
            "bash scripts/install-system-deps.sh (as root) installs them"
        )
    gpu = frameworks.torch_cuda_version(framework) is not None
    log(
        f"{AOTI_BACKEND}: building pytorch_backend (third_party/triton-aoti) against torch "
        f"{framework.version} ({'GPU' if gpu else 'CPU'}), about two minutes on two cores"
    )
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LIBRARY).unlink(missing_ok=True)
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(SCRIPT), str(carry), str(folder)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0 or not (folder / LIBRARY).is_file():
        raise NativeBackendError(
            f"{SCRIPT.name} failed (exit {done.returncode}):\n"
            + (done.stdout + done.stderr).strip()[-3000:]
        )
    Provenance(AOTI_BACKEND, LIBRARY, framework.distribution, framework.version, gpu, key).write(
        folder
    )
    log(f"{AOTI_BACKEND}: built {folder / LIBRARY} in {time.monotonic() - started:.0f} s")
    return folder / LIBRARY
