"""Why a native backend cannot be built or served."""

from __future__ import annotations


class NativeBackendError(RuntimeError):
    """A native backend is missing, stale or cannot be built; the message names the fix."""
