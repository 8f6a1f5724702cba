"""SIGTERM with the issue's load in flight (item 4): how many in-flight requests survive.

Starts ``python -m triton_kit.server serve`` on the full repository, sends ``--classify``
ResNet-50 and ``--translate`` NMT requests at once over gRPC (no SDK retries),
SIGTERMs the launcher ``--delay`` seconds later and reports per model how many
succeeded, the distinct errors, the launcher's exit code and how long it took to
stop. ``tests/integration/reliability/test_drain.py`` proves the same on a tiny repository.
"""

from __future__ import annotations

import argparse
import collections
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from triton_kit.benchmarks.harness.measure import report_header
from triton_kit.benchmarks.soak.run import SENTENCES, _jpeg
from triton_kit.client import TritonClient
from triton_kit.server import free_port
from triton_kit.server.launcher import wait_ready

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _wait_ready(port: int, timeout_s: float = 300.0) -> None:
    if not wait_ready(f"http://127.0.0.1:{port}", timeout_s):
        raise SystemExit(f"server not ready after {timeout_s} s")


def _call(url: str, kind: str, image: bytes) -> str:
    try:
        with TritonClient(url, timeout=120, retry=0) as client:
            if kind == "resnet50":
                client.classify(image)
            else:
                client.translate(SENTENCES[1], beam_size=4)
    except Exception as exc:  # the error is the result
        return f"{type(exc).__name__}: {exc}"[:160]
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--classify", type=int, default=32)
    parser.add_argument("--translate", type=int, default=4)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds before SIGTERM")
    parser.add_argument("--exit-timeout", type=int, default=30)
    args = parser.parse_args()
    print(
        report_header(
            "Drain: SIGTERM with requests in flight",
            command=f"python -m triton_kit.benchmarks.soak.drain --classify {args.classify} "
            f"--translate {args.translate} --delay {args.delay:g}",
            load=f"{args.classify} ResNet-50 and {args.translate} NMT requests at once, "
            f"SIGTERM after {args.delay:g} s",
        ),
        flush=True,
    )
    http, grpc = free_port(), free_port()
    launcher = subprocess.Popen(
        [sys.executable, "-m", "triton_kit.server", "serve", "--http-port", str(http),
         "--grpc-port", str(grpc), "--metrics-port", str(free_port()),
         "--exit-timeout", str(args.exit_timeout)],
        cwd=PROJECT_ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    _wait_ready(http)
    kinds = ["resnet50"] * args.classify + ["nmt"] * args.translate
    image, url = _jpeg(), f"grpc://127.0.0.1:{grpc}"
    with ThreadPoolExecutor(len(kinds)) as pool:
        futures = [pool.submit(_call, url, kind, image) for kind in kinds]
        time.sleep(args.delay)
        in_flight = sum(not f.done() for f in futures)
        start = time.monotonic()
        launcher.send_signal(signal.SIGTERM)
        results = [f.result() for f in futures]
    code = launcher.wait(2 * args.exit_timeout + 10)
    took = time.monotonic() - start
    print(f"in flight at SIGTERM: {in_flight} of {len(kinds)}")
    for kind in ("resnet50", "nmt"):
        mine = [r for k, r in zip(kinds, results, strict=True) if k == kind]
        print(f"{kind}: {mine.count('ok')}/{len(mine)} ok")
        for error, count in collections.Counter(r for r in mine if r != "ok").items():
            print(f"  {count} x {error}")
    print(f"launcher exit code {code}, stopped {took:.1f} s after SIGTERM")


if __name__ == "__main__":
    main()
