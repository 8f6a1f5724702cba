"""Run by tests/integration/loadtest/test_sidecar.py in its own gevent-patched process: the SDK over
the Locust gRPC sidecar, an error from the server, and a sidecar killed under a call.

``python -m tests.integration.loadtest.sidecar_probe GRPC_URL [KIND]`` prints one JSON object;
KIND is one of
``sidecar_client.KINDS`` (default ``auto``).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402

from triton_kit.client import TritonClient  # noqa: E402
from triton_kit.loadtest.sidecar import client as sidecar_client  # noqa: E402

WRONG_INPUT = {"NOT_AN_INPUT": np.zeros((1, 1), dtype=np.float32)}


def describe(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "status": str(getattr(exc, "status", None)),
    }


def timed_failure(fn: Any) -> dict[str, Any]:
    start = time.monotonic()
    try:
        fn()
    except Exception as exc:
        return {**describe(exc), "seconds": time.monotonic() - start}
    return {"type": None, "seconds": time.monotonic() - start}


def main(url: str, kind: str) -> dict[str, Any]:
    factory = functools.partial(sidecar_client.factory, kind=kind)
    client = TritonClient(url, timeout=30, retry=0, client_factory=factory)
    out: dict[str, Any] = {"ready": client.server_ready() and client.model_ready("bert")}
    out["embedding"] = client.embed("A sentence for the sidecar.").tolist()
    out["invalid"] = timed_failure(lambda: client.infer("bert", WRONG_INPUT))
    (sidecar,) = sidecar_client._sidecars.values()
    out["sidecar_pid"] = sidecar.pid
    out["native"] = sidecar.native
    # A call in flight when the sidecar dies: stopped first so the call cannot complete.
    os.kill(sidecar.pid, signal.SIGSTOP)
    gevent.spawn_later(0.5, os.kill, sidecar.pid, signal.SIGKILL)
    out["killed_in_flight"] = timed_failure(lambda: client.embed("in flight"))
    out["after_death"] = timed_failure(lambda: client.embed("after"))
    sidecar_client.close_all()
    client.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "auto")))
