"""Model Analyzer in its own venv, perf_analyzer in the kit's, and the embedded server's files.

Model Analyzer pins numpy 2 and a newer tritonclient than the kit's ``.venv`` (numpy<2 for
nvidia-pytriton), so it gets its own venv under build/, as checkov does in the Makefile.
perf_analyzer comes from the tritonclient 2.51 wheel through the kit's install script.
The server's binary, backend directory and environment come from :mod:`triton_kit.server.binary`, as
the kit's launcher gets them, so whichever backends the kit serves with are the ones tuned.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import venv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from triton_kit.loadtest.tune.errors import TuneError
from triton_kit.loadtest.tune.options import MODEL_ANALYZER_SPEC, PROJECT_ROOT
from triton_kit.server import binary
from triton_kit.server.errors import BinaryNotFoundError
from triton_kit.server.model_backends import native_backends_needed

PERF_ANALYZER_SCRIPT = PROJECT_ROOT / "scripts" / "install-perf-analyzer.sh"


def model_analyzer(venv_dir: Path, installed: Path | None = None) -> Path:
    """The ``model-analyzer`` executable: ``installed`` where given (--model-analyzer),
    else the venv's, installed from PyPI the first time."""
    if installed is not None:
        if not (installed.is_file() and os.access(installed, os.X_OK)):
            raise TuneError(f"--model-analyzer {installed}: not an executable file")
        return installed
    binary = venv_dir / "bin" / "model-analyzer"
    if binary.exists():
        return binary
    print(f"[tune] installing {MODEL_ANALYZER_SPEC} into {venv_dir} (first use)", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    pip = [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, "--disable-pip-version-check", MODEL_ANALYZER_SPEC], "installing Model Analyzer")
    return binary


def perf_analyzer(path: Path) -> Path:
    """perf_analyzer beside the kit's interpreter, installed by the kit's script if missing."""
    if path.exists():
        return path
    print(f"[tune] installing perf_analyzer into {path.parent.parent}", flush=True)
    _run(["bash", str(PERF_ANALYZER_SCRIPT), str(path.parent.parent)], "installing perf_analyzer")
    return path


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip()[-2000:]
        raise TuneError(f"{what} failed ({' '.join(command)}):\n{tail}")


def gpu_present() -> bool:
    """Whether nvidia-smi lists a GPU: engines then get KIND_GPU (:func:`space.instance_kind`)."""
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listing.returncode == 0 and "GPU" in listing.stdout


# Model Analyzer finds GPUs through DCGM 4 (libdcgm.so.4), which the kit does not ship, and
# hands tritonserver CUDA_VISIBLE_DEVICES set to the GPUs it found: with none found, an empty
# list, which hides every GPU from a KIND_GPU model. The kit's launcher passes the caller's
# CUDA_VISIBLE_DEVICES on; Model Analyzer runs with numba's CUDA off (no DCGM lookup; its GPU
# metrics come from Triton's metrics endpoint) and starts the server through this wrapper,
# which puts the caller's value back (or none).
MODEL_ANALYZER_ENV = {"NUMBA_DISABLE_CUDA": "1"}


def server_wrapper(executable: Path, dest: Path, visible: str | None) -> Path:
    """A script at ``dest`` that runs ``executable`` with CUDA_VISIBLE_DEVICES as the caller had
    it (``visible``; None: unset), whatever Model Analyzer set."""
    restore = (
        "unset CUDA_VISIBLE_DEVICES"
        if visible is None
        else f"export CUDA_VISIBLE_DEVICES={shlex.quote(visible)}"
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(
        "#!/bin/sh\n# loadtest tune: Model Analyzer sets CUDA_VISIBLE_DEVICES to the GPUs it "
        "found through DCGM (none here).\n"
        f'{restore}\nexec {shlex.quote(str(executable))} "$@"\n'
    )
    dest.chmod(0o755)
    return dest


@dataclass(frozen=True)
class EmbeddedServer:
    """What Model Analyzer needs to launch the kit's tritonserver itself."""

    binary: Path
    backends: Path
    env: dict[str, str]


def embedded_server(repository: Path, models: Iterable[str], dest: Path) -> EmbeddedServer:
    """The backend directory assembled in ``dest``; a TuneError where a backend the models
    need is missing (the launcher refuses the same way)."""
    try:
        installation = binary.find_installation()
    except BinaryNotFoundError as exc:
        raise TuneError(str(exc)) from None
    backends = binary.assemble_backend_dir(installation, dest)
    wanted = set(models)
    needed = {
        name: users
        for name, all_users in native_backends_needed(repository).items()
        if (users := sorted(wanted & set(all_users)))
    }
    missing = binary.missing_native_backends(backends, set(needed))
    if missing:
        raise TuneError(
            "; ".join(f"{why} (needed by {', '.join(needed[n])})" for n, why in missing.items())
        )
    wrapper = server_wrapper(
        installation.binary, dest.parent / "tritonserver", os.environ.get("CUDA_VISIBLE_DEVICES")
    )
    return EmbeddedServer(wrapper, backends, binary.server_environment(installation))
