"""What TensorRT and GPUs this machine has, without needing TensorRT or CUDA Python packages.

Plans only run on the TensorRT version and GPU compute capability that built
them, so both the build (sidecar) and the server launcher (check) ask here.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
TRITON_TENSORRT_BACKEND = Path("/opt/tritonserver/backends/tensorrt/libtriton_tensorrt.so")


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str  # "9.0"


@dataclass(frozen=True)
class TensorRTRuntime:
    version: str | None  # "10.5.0", or None where no TensorRT is visible
    source: str  # where the version was read from, for messages


def release(text: str) -> str | None:
    """The first major.minor.patch in ``text`` ("10.5.0.18" -> "10.5.0")."""
    match = _RELEASE.search(text)
    return ".".join(match.groups()) if match else None


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


def tensorrt_runtime() -> TensorRTRuntime:
    """The TensorRT a server here would load plans with, from the most to the least direct source.

    1. the ``tensorrt`` Python package; 2. ``getInferLibVersion()`` of a loadable libnvinfer
    (TensorRT 10+: major*10000 + minor*100 + patch); 3. the libnvinfer that Triton's TensorRT
    backend links; 4. ``$TRT_VERSION`` (set in NVIDIA's containers).
    """
    try:
        import tensorrt

        return TensorRTRuntime(release(tensorrt.__version__), "tensorrt Python package")
    except ImportError:
        pass
    for soname in ("libnvinfer.so.11", "libnvinfer.so.10"):
        version = _libnvinfer_version(soname)
        if version:
            return TensorRTRuntime(version, soname)
    linked = _backend_libnvinfer()
    if linked:
        return TensorRTRuntime(release(linked.name), str(linked))
    from_env = release(os.environ.get("TRT_VERSION", ""))
    if from_env:
        return TensorRTRuntime(from_env, "$TRT_VERSION")
    return TensorRTRuntime(None, "no tensorrt package, libnvinfer or Triton TensorRT backend")


def _libnvinfer_version(soname: str) -> str | None:
    try:
        lib = ctypes.CDLL(soname)
    except OSError:
        return None
    number = int(lib.getInferLibVersion())
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def _backend_libnvinfer() -> Path | None:
    if not TRITON_TENSORRT_BACKEND.exists() or shutil.which("ldd") is None:
        return None
    ldd = subprocess.run(
        ["ldd", str(TRITON_TENSORRT_BACKEND)], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(r"libnvinfer\.so\.\d+\s+=>\s+(\S+)", ldd)
    return Path(match.group(1)).resolve() if match else None
