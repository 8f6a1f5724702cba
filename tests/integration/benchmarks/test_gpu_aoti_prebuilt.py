"""scripts/gpu/aoti_prebuilt.sh: the pytorch_aoti backend carried prebuilt to the GPU machine is
used only where it was built from the same inputs against the same torch, and where it links;
anything else is refused, and bench.sh builds as before. Here on CPU with this machine's own
build of the backend (tests/support/aoti.py) and the nvidia-pytriton libraries: the GPU
machine's build cannot run here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.aoti import built_aoti_backend

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts/gpu/aoti_prebuilt.sh"
LIB = "libtriton_pytorch_aoti.so"


def _server_libs() -> Path:
    import pytriton

    return Path(pytriton.__file__).resolve().parents[1] / "nvidia_pytriton.libs"


def _script(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHON": sys.executable,
               "TRITON_KIT_SERVER_LIBS": str(_server_libs()), **env}  # fmt: skip
    return subprocess.run(["bash", str(SCRIPT), *args], env=environ, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tar = tmp_path_factory.mktemp("prebuilt") / "aoti-prebuilt.tar.xz"
    assert _script("pack", str(built_aoti_backend() / LIB), str(tar)).returncode == 0
    return tar


def test_a_backend_built_from_these_inputs_against_this_torch_is_used(
    packed: Path, tmp_path: Path
) -> None:
    done = _script("use", str(packed), str(tmp_path / "dest"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dest" / LIB).read_bytes() == (built_aoti_backend() / LIB).read_bytes()


def test_other_build_inputs_are_refused(packed: Path, tmp_path: Path) -> None:
    """The key covers aoti_backend.sh, the pinned sources, the build options and the torch (a
    build type stands in for a changed input: the key is one hash of them all)."""
    done = _script("use", str(packed), str(tmp_path / "dest"), TRITON_KIT_AOTI_BUILD_TYPE="Debug")
    assert done.returncode == 1 and "built from other inputs" in done.stderr
    assert not (tmp_path / "dest").exists()


def test_a_backend_that_does_not_link_here_is_refused(packed: Path, tmp_path: Path) -> None:
    """Without the trimmed server's libraries the backend's libtritonserver is not found: every
    symbol is resolved before the backend is taken, so a mismatch shows before Triton loads it."""
    done = _script("use", str(packed), str(tmp_path / "dest"), TRITON_KIT_SERVER_LIBS="/nowhere")
    assert done.returncode == 1 and "does not link here" in done.stderr
    assert "libtritonserver" in done.stderr
    assert not (tmp_path / "dest").exists()
