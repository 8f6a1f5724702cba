"""Make gRPC's C core cooperate with gevent, before any channel exists.

Locust runs every user in a greenlet. Without ``init_gevent`` a blocking gRPC call
blocks the whole process (users starve, SIGTERM is never handled); with it, calls
yield to the hub. It must run before the first channel is created, so the users
module calls :func:`init` at import time.
"""

from __future__ import annotations

_done = False


def init() -> None:
    """Idempotent: patch grpc for gevent once per process."""
    global _done
    if _done:
        return
    import grpc.experimental.gevent as grpc_gevent  # grpcio comes with tritonclient[grpc]

    grpc_gevent.init_gevent()
    _done = True
