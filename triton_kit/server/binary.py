"""Locate a tritonserver binary and assemble what it needs to run.

Three sources, in order: an explicit ``TRITONSERVER`` path, a ``tritonserver`` on
PATH (the official container's ``/opt/tritonserver/bin``), and the binary bundled
in the ``nvidia-pytriton`` wheel, which runs on CPU-only machines without Docker.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from triton_kit.server.errors import BinaryNotFoundError
from triton_kit.server.native_backends import SERVED_BACKENDS, NativeBackendError, built_library
from triton_kit.server.native_backends.provenance import RECORD_NAME

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONTAINER_BINARY = Path("/opt/tritonserver/bin/tritonserver")
STUB_PYTHON_ENV = "TRITON_KIT_STUB_PYTHON"


@dataclass(frozen=True)
class TritonInstallation:
    """A tritonserver binary and the files it depends on."""

    binary: Path
    backends: Path
    library_path: Path | None = None
    from_wheel: bool = False

    @property
    def server_library(self) -> Path | None:
        """libtritonserver: beside the binary in a container (``lib/libtritonserver.so``), or
        the nvidia-pytriton wheel's renamed copy in ``library_path``; None if neither exists."""
        candidates = [self.binary.parent.parent / "lib" / "libtritonserver.so"]
        if self.library_path is not None:
            candidates += sorted(self.library_path.glob("libtritonserver*.so"))
        return next((path for path in candidates if path.exists()), None)


def _wheel_root() -> Path | None:
    try:
        import pytriton
    except ImportError:
        return None
    root = Path(pytriton.__file__).resolve().parent / "tritonserver"
    return root if (root / "bin" / "tritonserver").exists() else None


def find_installation() -> TritonInstallation:
    """Return the first usable tritonserver installation, or explain what is missing."""
    explicit = os.environ.get("TRITONSERVER")
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BinaryNotFoundError(f"TRITONSERVER={explicit} is not an executable file")
        return _installation_for(path)
    on_path = shutil.which("tritonserver")
    if on_path:
        return _installation_for(Path(on_path))
    if CONTAINER_BINARY.exists():
        return _installation_for(CONTAINER_BINARY)
    root = _wheel_root()
    if root is not None:
        libs = root.parent.parent / "nvidia_pytriton.libs"
        return TritonInstallation(root / "bin" / "tritonserver", root / "backends", libs, True)
    raise BinaryNotFoundError(
        "no tritonserver found: set TRITONSERVER=/path/to/tritonserver, put it on PATH, "
        "or install the kit's serve extra, `pip install 'triton-kit[serve]'` (its nvidia-pytriton "
        "bundles the binary; `make setup` does this)"
    )


def _installation_for(binary: Path) -> TritonInstallation:
    """A binary from a container or a custom build keeps its own backends folder."""
    root = _wheel_root()
    if root is not None and binary.resolve() == (root / "bin" / "tritonserver").resolve():
        return TritonInstallation(
            binary, root / "backends", root.parent.parent / "nvidia_pytriton.libs", True
        )
    return TritonInstallation(binary, binary.resolve().parent.parent / "backends")


def assemble_backend_dir(installation: TritonInstallation, dest: Path) -> Path:
    """Build a backend directory of Triton's own backends.

    A container or custom build keeps its own backends (its native onnxruntime and
    pytorch). The wheel ships only the python backend, so Triton's own onnxruntime and
    pytorch backends, built from the 24.10 sources by ``python -m triton_kit.server.native_backends
    build``, and the opt-in ``pytorch_aoti`` (``... build pytorch_aoti``), are added where they
    are built and current; a missing one is not replaced by anything
    (``missing_native_backends`` says why, the launcher refuses to start).
    """
    dest.mkdir(parents=True, exist_ok=True)
    if installation.from_wheel:
        _add_python_stub(installation, dest / "python")
        for name in SERVED_BACKENDS:
            _add_native_backend(name, dest / name)
    else:
        for backend in sorted(installation.backends.iterdir()):
            _link(backend, dest / backend.name)
    return dest


def _add_native_backend(name: str, folder: Path) -> None:
    """A copy, not a link: Triton rejects a backend library whose real path lies outside the
    backend directory. Its build record goes with it (the launcher reads ``text_mode``)."""
    try:
        library = built_library(name)
    except NativeBackendError:
        return
    folder.mkdir(exist_ok=True)
    shutil.copy2(library, folder / library.name)
    record = library.parent / RECORD_NAME
    if record.is_file():
        shutil.copy2(record, folder / RECORD_NAME)


def missing_native_backends(backend_dir: Path, needed: set[str]) -> dict[str, str]:
    """For each needed native backend that ``backend_dir`` lacks, the one-line reason."""
    missing = {}
    for name in sorted(needed):
        if (backend_dir / name).is_dir():
            continue
        try:
            built_library(name)
            missing[name] = f"Triton's {name} backend is not in {backend_dir}"
        except NativeBackendError as exc:
            missing[name] = str(exc)
    return missing


def _add_python_stub(installation: TritonInstallation, python_dir: Path) -> None:
    """The wheel keeps one stub per interpreter; Triton wants it beside libtriton_python.so."""
    if python_dir.is_symlink():
        python_dir.unlink()
    python_dir.mkdir(exist_ok=True)
    # Copies, not links: Triton rejects a backend library whose real path lies
    # outside the backend directory.
    for item in (installation.backends / "python").iterdir():
        if item.is_file():
            shutil.copy2(item, python_dir / item.name)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = installation.backends.parent / "python_backend_stubs" / version
    stub = stub / "triton_python_backend_stub"
    if not stub.exists():
        raise BinaryNotFoundError(
            f"nvidia-pytriton has no python backend stub for Python {version}"
        )
    shutil.copy2(stub, python_dir / stub.name)


def _link(src: Path, dst: Path) -> None:
    if dst.is_symlink() or dst.exists():
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        else:
            dst.unlink()
    dst.symlink_to(src.resolve())


def server_environment(installation: TritonInstallation) -> dict[str, str]:
    """Environment for tritonserver and its python stubs.

    The stub is a separate process started by Triton; it finds numpy, tokenizers
    and the project's ``python_models`` package only through PATH and PYTHONPATH.
    """
    env = dict(os.environ)
    if installation.library_path is not None:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(installation.library_path), env.get("LD_LIBRARY_PATH", "")) if p
        )
    # The stub ignores PYTHONPATH and takes its sys.path from the venv of the `python3`
    # first on PATH (probed on the GPU machine, 2026-11-23): the launcher's own, or the one
    # STUB_PYTHON_ENV names (the GPU run gives the stubs a numpy<2 venv that way).
    bin_dir = str(Path(os.environ.get(STUB_PYTHON_ENV) or sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    site_packages = sysconfig.get_paths()["purelib"]
    # An explicit PYTHONPATH outranks the interpreter's site-packages, as in Python itself.
    python_path = [str(PROJECT_ROOT), env.get("PYTHONPATH", ""), site_packages]
    env["PYTHONPATH"] = os.pathsep.join(p for p in python_path if p)
    return env
