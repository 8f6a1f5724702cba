"""A Locust file for tests/integration/loadtest/test_sidecar.py: the real BertUser, its replies
kept.

Loaded only by a Locust subprocess (never imported by pytest: Locust patches gevent).
Each user keeps the first embedding it gets per text; at test stop the process writes
them, and the pids and kinds of the gRPC sidecars it started, to ``$SIDECAR_TEST_DUMP``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from locust import events

from triton_kit.loadtest.sidecar import client as sidecar_client
from triton_kit.loadtest.users import BertUser

_seen: dict[str, list[float]] = {}
_sidecar_pids: set[int] = set()
_sidecar_kinds: set[str] = set()


class RecordingBertUser(BertUser):
    """BertUser whose embeddings are kept for the test's reference check."""

    def _embed(self, task_name: str, texts: list[str]) -> None:
        text = self.rng.choice(texts)
        result = self.call(task_name, lambda client: client.embed(text), len(text))
        _sidecar_pids.update(s.pid for s in sidecar_client._sidecars.values())
        _sidecar_kinds.update(
            "native" if s.native else "python" for s in sidecar_client._sidecars.values()
        )
        if result is not None and text not in _seen:
            _seen[text] = [float(v) for v in result.reshape(-1)]


@events.test_stop.add_listener
def _dump(**_kwargs: Any) -> None:
    with open(os.environ["SIDECAR_TEST_DUMP"], "w") as handle:
        json.dump(
            {
                "embeddings": _seen,
                "sidecar_pids": sorted(_sidecar_pids),
                "sidecar_kinds": sorted(_sidecar_kinds),
            },
            handle,
        )
