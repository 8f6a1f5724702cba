"""Drain before stopping: unload the models clients call first, so their steps keep running.

A SIGTERM'd tritonserver 2.51 leaves its READY state at once: over gRPC (whose
frontend does not hold the shutdown for open calls, unlike HTTP) every BLS call a
python model makes from then on is refused with "Server not ready", so in-flight
BLS requests fail. Unloading a model through the repository API instead refuses
new requests to it while Triton lets its in-flight ones finish; its step models
stay loaded and the server stays READY for them. So the launcher unloads the
*entry* models (ensembles, and python models no ensemble uses as a step: the
possible BLS callers) and waits for them to reach UNAVAILABLE, then SIGTERMs.
This needs ``--model-control-mode=explicit`` (with ``--load-model=*``).

Run as a script (``python3 -m triton_kit.server.drain``) it is the stop path of a tritonserver
that no launcher runs: the Kubernetes preStop hook and the compose entrypoint
(docker/drain-on-stop.sh) call it, and the serving image carries this module and
triton_kit/server/security.py only (stdlib imports, Python 3.10).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from triton_kit.server.security import API_KEY_ENV, api_key_headers

CONTROL_ARGS = ["--model-control-mode=explicit", "--load-model=*"]


def entry_models(configs: Mapping[str, Mapping]) -> list[str]:
    """Ensembles, and python models and the kit's ctranslate2 text models (the default ``nmt``:
    parameter ``source_spm``, TEXT in, TRANSLATION out) that are no ensemble's step, by served
    config."""
    steps = {
        step["model_name"]
        for config in configs.values()
        for step in config.get("ensemble_scheduling", {}).get("step", [])
    }
    return sorted(
        name
        for name, config in configs.items()
        if config.get("platform") == "ensemble"
        or ((config.get("backend") == "python" or _ct2_text(config)) and name not in steps)
    )


def _ct2_text(config: Mapping) -> bool:
    """The kit's ctranslate2 backend in its text mode: a model clients call (``nmt``); the
    backend's ids mode (``nmt_ct2``) is a step of the python ``nmt``."""
    return config.get("backend") == "ctranslate2" and "source_spm" in config.get("parameters", {})


class Drainer:
    """Unloads entry models over Triton's (key-restricted) HTTP repository API."""

    def __init__(self, http_url: str, api_key: str) -> None:
        self.http_url = http_url
        self.headers = api_key_headers(api_key)

    def _call(self, path: str, body: bytes | None = None, timeout: float = 5.0) -> object:
        request = urllib.request.Request(f"{self.http_url}{path}", data=body, headers=self.headers)
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def states(self) -> dict[str, str]:
        index = self._call("/v2/repository/index", b"{}")
        return {m["name"]: m.get("state", "") for m in index}  # type: ignore[union-attr]

    def configs(self, names: Iterable[str]) -> dict[str, dict]:
        return {n: self._call(f"/v2/models/{n}/config") for n in names}  # type: ignore[misc]

    def drain(self, timeout_s: float) -> list[str]:
        """Unload the entry models; wait until they are gone or ``timeout_s`` passes.

        Returns the entry models still not unloaded (empty when the drain finished).
        """
        deadline = time.monotonic() + timeout_s
        ready = [n for n, s in self.states().items() if s == "READY"]
        entries = entry_models(self.configs(ready))
        # All at once: an unload may block until that model's in-flight work is done.
        with ThreadPoolExecutor(max(len(entries), 1)) as pool:
            list(pool.map(lambda name: self._unload(name, deadline), entries))
        left = entries
        while left and time.monotonic() < deadline:
            states = self.states()
            left = [n for n in entries if states.get(n) != "UNAVAILABLE"]
            if left:
                time.sleep(0.1)
        return left

    def _unload(self, name: str, deadline: float) -> None:
        timeout = max(deadline - time.monotonic(), 0.1)
        with contextlib.suppress(urllib.error.URLError, TimeoutError, OSError):
            self._call(f"/v2/repository/models/{name}/unload", b"{}", timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    """Drain a running tritonserver; exit 1 if entry models were still busy at the timeout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="Triton's HTTP address")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait at most")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        help="seconds to keep serving first (Kubernetes: until endpoints drop the pod)",
    )
    args = parser.parse_args(argv)
    time.sleep(args.pause)
    try:
        left = Drainer(args.url, os.environ.get(API_KEY_ENV, "")).drain(args.timeout)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"drain failed: {exc}", file=sys.stderr)
        return 1
    if left:
        print(f"drain incomplete after {args.timeout:g} s: {left}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
