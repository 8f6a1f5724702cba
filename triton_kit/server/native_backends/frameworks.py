"""The frameworks a native backend links: this environment's own onnxruntime, torch and
ctranslate2 wheels.

Found by their installed files, without importing them (importing torch costs seconds), so
the launcher can check a built backend against them on every start.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from triton_kit.server.native_backends.errors import NativeBackendError


@dataclass(frozen=True)
class Framework:
    """An installed framework: its distribution version, headers and shared libraries."""

    distribution: str
    version: str
    package_dir: Path

    @property
    def lib_dir(self) -> Path:
        if self.distribution == "ctranslate2":  # auditwheel's folder beside the package
            return self.package_dir.parent / "ctranslate2.libs"
        return self.package_dir / ("capi" if self.distribution == "onnxruntime" else "lib")


def installed(distribution: str) -> Framework | None:
    """The framework importable here, or None; the distribution name is what pip knows."""
    module = distribution  # the three import as they install
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    return Framework(distribution, version, Path(spec.origin).resolve().parent)


def require(distribution: str) -> Framework:
    found = installed(distribution)
    if found is None:
        raise NativeBackendError(
            f"{distribution} is not installed in this environment ({distribution} is what the "
            "native backend links): `make setup` installs it"
        )
    return found


def onnxruntime_library(framework: Framework) -> Path:
    """The wheel's C API library (``libonnxruntime.so.<version>``): the backend links it."""
    return _wheel_library(
        framework,
        "libonnxruntime.so.*",
        "this onnxruntime wheel ships no C API library to build Triton's onnxruntime backend "
        "against",
    )


def _wheel_library(framework: Framework, pattern: str, missing: str) -> Path:
    """The newest of ``framework``'s libraries matching ``pattern``; ``missing`` says why
    none is a problem."""
    candidates = sorted(framework.lib_dir.glob(pattern))
    if not candidates:
        raise NativeBackendError(f"no {pattern} in {framework.lib_dir}: {missing}")
    return candidates[-1]


def torch_cuda_version(framework: Framework) -> str | None:
    """CUDA version the torch wheel was built with (None for a CPU wheel), read from its
    ``version.py`` so nothing is imported."""
    version_file = framework.package_dir / "version.py"
    scope: dict[str, object] = {}
    exec(compile(version_file.read_text(), str(version_file), "exec"), scope)
    cuda = scope.get("cuda")
    return str(cuda) if cuda else None


def ctranslate2_library(framework: Framework) -> Path:
    """The wheel's ``libctranslate2-<hash>.so.<version>``: the ctranslate2 backend links it."""
    return _wheel_library(
        framework,
        "libctranslate2*.so*",
        "this ctranslate2 install ships no shared library to build the ctranslate2 backend "
        "against (the PyPI wheel does)",
    )


def cxx11_abi(library: Path) -> bool:
    """Whether ``library`` was built with libstdc++'s C++11 ABI (``_GLIBCXX_USE_CXX11_ABI=1``):
    its exported names then hold ``std::__cxx11::basic_string``."""
    return b"NSt7__cxx1112basic_string" in library.read_bytes()
