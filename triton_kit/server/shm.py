"""The python backend's /dev/shm regions: name them as ours, remove them when their owner is gone.

A killed server leaves every stub's region behind (up to hundreds of MB of RAM).
Each launch names its regions ``triton_kit_<launcher pid>_<token>_...`` through
the backend's ``shm-region-prefix-name``; a region is removed only when it has
that shape and its launcher process no longer exists, so other servers' regions
(and live ones of ours) are never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from pathlib import Path

SHM_DIR = Path("/dev/shm")
PREFIX = "triton_kit_"
_OURS = re.compile(rf"^{PREFIX}(?P<pid>\d+)_[0-9a-f]+_")
# Python-based backends take the same setting under their own name (Triton's onnxruntime
# and pytorch backends are native and make no such regions).
PYTHON_BASED_BACKENDS = ("python",)


def new_prefix() -> str:
    return f"{PREFIX}{os.getpid()}_{secrets.token_hex(4)}_"


def prefix_args(prefix: str) -> list[str]:
    return [f"--backend-config={b},shm-region-prefix-name={prefix}" for b in PYTHON_BASED_BACKENDS]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_regions(prefix: str, shm_dir: Path = SHM_DIR) -> list[Path]:
    """Remove this launch's regions (on stop)."""
    return _remove(p for p in _listing(shm_dir) if p.name.startswith(prefix))


def remove_orphans(shm_dir: Path = SHM_DIR) -> list[Path]:
    """Remove regions of ours whose launcher has died (at start)."""
    orphans = []
    for path in _listing(shm_dir):
        match = _OURS.match(path.name)
        if match and not _alive(int(match["pid"])):
            orphans.append(path)
    return _remove(orphans)


def _listing(shm_dir: Path) -> list[Path]:
    with contextlib.suppress(OSError):
        return list(shm_dir.iterdir())
    return []


def _remove(paths) -> list[Path]:
    removed = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            path.unlink()
            removed.append(path)
    return removed
