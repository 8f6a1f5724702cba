"""What TensorRT and GPUs this machine has, without needing TensorRT or CUDA Python packages.

Plans only run on the TensorRT version and GPU compute capability that built
them, so both the server launcher (``plan_check``) and the build (sidecar) ask here:
it lives on the server side so that ``triton_kit/server/`` never imports ``build_engines``.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
TENSORRT_BACKEND_LIBRARY = Path("tensorrt") / "libtriton_tensorrt.so"


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str  # "9.0"


@dataclass(frozen=True)
class TensorRTRuntime:
    version: str | None  # "10.5.0", or None where no TensorRT is visible
    source: str  # where the version was read from, for messages


def release(text: str) -> str | None:
    """The one normalised form of a TensorRT version: major.minor.patch.

    PyPI has "10.5.0" but "10.8.0.43" from 10.8 on, ``trt.__version__`` carries the build
    number, libnvinfer's file name has three parts: all become "10.8.0"."""
    match = _RELEASE.search(text or "")
    if not match:
        return None
    major, minor, patch = match.groups()
    return f"{major}.{minor}.{patch or 0}"


def visible_gpus() -> list[Gpu]:
    """GPUs as ``nvidia-smi`` lists them (name, compute capability); [] where there is none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return parse_nvidia_smi(out)


def parse_nvidia_smi(text: str) -> list[Gpu]:
    gpus = []
    for line in text.strip().splitlines():
        name, _, capability = line.rpartition(",")
        if name.strip():
            gpus.append(Gpu(name.strip(), capability.strip()))
    return gpus


def server_backend_directories() -> list[Path]:
    """Backend folders of the tritonserver in use: ``$TRITON_BACKEND_DIRECTORY``, then the
    ``backends/`` beside the ``tritonserver`` on PATH (``<root>/bin/tritonserver``); no
    install prefix is assumed."""
    found = []
    if os.environ.get("TRITON_BACKEND_DIRECTORY"):
        found.append(Path(os.environ["TRITON_BACKEND_DIRECTORY"]))
    binary = shutil.which("tritonserver")
    if binary:
        found.append(Path(binary).resolve().parent.parent / "backends")
    return found


def tensorrt_runtime(backend_directories: list[Path] | None = None) -> TensorRTRuntime:
    """The TensorRT the server deserialises plans with, from the most to the least direct source.

    1. the libnvinfer that the server's TensorRT backend links (what loads the plans);
    2. ``$TRT_VERSION`` (set in NVIDIA's containers); 3. ``getInferLibVersion()`` of a
    libnvinfer on the default library path; 4. the ``tensorrt`` Python package, which only
    says what a build here would use."""
    directories = (
        server_backend_directories() if backend_directories is None else backend_directories
    )
    for directory in directories:
        library = Path(directory) / TENSORRT_BACKEND_LIBRARY
        linked = linked_libnvinfer(library) if library.exists() else None
        version = linked and (_libnvinfer_version(str(linked)) or release(linked.name))
        if version:
            return TensorRTRuntime(version, f"{linked}, linked by {library}")
    from_env = release(os.environ.get("TRT_VERSION", ""))
    if from_env:
        return TensorRTRuntime(from_env, "$TRT_VERSION")
    for soname in ("libnvinfer.so.11", "libnvinfer.so.10"):
        version = _libnvinfer_version(soname)
        if version:
            return TensorRTRuntime(version, soname)
    try:
        import tensorrt

        return TensorRTRuntime(release(tensorrt.__version__), "tensorrt Python package")
    except ImportError:
        pass
    return TensorRTRuntime(None, "no Triton TensorRT backend, libnvinfer or tensorrt package")


def _libnvinfer_version(name: str) -> str | None:
    """``getInferLibVersion()``: TensorRT 10+ encodes major*10000 + minor*100 + patch."""
    try:
        number = int(ctypes.CDLL(name).getInferLibVersion())
    except (OSError, AttributeError):
        return None
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def linked_libnvinfer(library: Path) -> Path | None:
    """The libnvinfer file ``library`` resolves to (``ldd``), or None."""
    if shutil.which("ldd") is None:
        return None
    ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True, check=False).stdout
    match = re.search(r"libnvinfer\.so\.\d+\s+=>\s+(\S+)", ldd)
    return Path(match.group(1)).resolve() if match else None
