"""Fail unless the TensorRT Python package matches the TensorRT library Triton's backend loads.

A plan only deserialises on the TensorRT version that built it, so build-engines must build
with exactly the version the `triton` service serves with. Run at image build time:
`python3 check_tensorrt_version.py` exits 1 with an explanation when they differ.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TENSORRT_BACKEND = Path("/opt/tritonserver/backends/tensorrt/libtriton_tensorrt.so")
_LDD_NVINFER = re.compile(r"libnvinfer\.so\.\d+\s+=>\s+(?P<path>\S+)")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def release(text: str) -> str | None:
    """The first major.minor.patch in ``text`` ("10.5.0.18" -> "10.5.0")."""
    match = _VERSION.search(text)
    return ".".join(match.groups()) if match else None


def server_tensorrt_version(backend: Path = TENSORRT_BACKEND) -> tuple[str, str]:
    """The TensorRT version of the libnvinfer that Triton's backend links, and its source."""
    if backend.exists():
        ldd = subprocess.run(["ldd", str(backend)], capture_output=True, text=True, check=False)
        match = _LDD_NVINFER.search(ldd.stdout)
        if match:
            real = Path(match["path"]).resolve()
            version = release(real.name)
            if version:
                return version, str(real)
    from_env = release(os.environ.get("TRT_VERSION", ""))
    if from_env:
        return from_env, "$TRT_VERSION"
    raise SystemExit(
        f"cannot tell which TensorRT the server uses: {backend} does not resolve libnvinfer "
        "and TRT_VERSION is unset; is the base image nvcr.io/nvidia/tritonserver:<yy.mm>-py3?"
    )


def main() -> int:
    import tensorrt  # only present in the build-engines image

    python_version = release(tensorrt.__version__)
    server_version, source = server_tensorrt_version()
    if python_version != server_version:
        print(
            f"TensorRT mismatch: the tensorrt Python package is {tensorrt.__version__} but the "
            f"server's TensorRT is {server_version} ({source}); rebuild the image with "
            f"--build-arg TENSORRT_VERSION={server_version}",
            file=sys.stderr,
        )
        return 1
    print(f"TensorRT {python_version}: Python package matches the server ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
