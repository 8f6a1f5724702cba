"""A repository built by ``python -m triton_kit.build_engines`` for one test module, and
Triton serving it.

The served-build tests (the TorchScript step models, the TorchScript search of either
architecture) build their own variant into a temporary folder rather than the shared
model_repository, then start the embedded Triton on it with free ports.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.server import ServerConfig, TritonServer


def build_repository(root: Path, *flags: str) -> tuple[Path, str]:
    """``python -m triton_kit.build_engines FLAGS`` in a subprocess into ``root/repo`` (work
    files in ``root/work``): the repository and the build's output. A failed build fails the
    test with the end of its log."""
    repository = root / "repo"
    argv = [sys.executable, "-m", "triton_kit.build_engines", *flags]
    argv += ["--output-repository", str(repository), "--work-dir", str(root / "work")]
    done = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return repository, done.stdout


@contextmanager
def serving(repository: Path, log_file: Path) -> Iterator[TritonServer]:
    """Triton on ``repository`` with free ports, its log in ``log_file``."""
    config = ServerConfig(
        model_repository=repository, http_port=0, grpc_port=0, metrics_port=0, log_file=log_file
    )
    with TritonServer(config) as server:
        yield server
