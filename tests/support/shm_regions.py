"""The SDK's shared-memory regions of THIS process (other processes' runs may leave theirs)."""

from __future__ import annotations

import glob
import os


def own_regions() -> list[str]:
    """``/dev/shm/tkclient_<pid>_<n>``: the SDK names its regions after the creating process."""
    return glob.glob(f"/dev/shm/tkclient_{os.getpid()}_*")
