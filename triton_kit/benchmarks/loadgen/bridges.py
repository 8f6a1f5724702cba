"""Ways to drive gRPC from gevent greenlets, measured against the plain asyncio client.

With init_gevent the Locust gRPC user reached about 0.63x the plain client (it now goes
through a sidecar process: triton_kit/loadtest/sidecar/server.py,
benchmarks/results/loadgen.md). This measures candidate bridges between greenlets and gRPC's
C core in isolation (no Locust, the same closed loops, the same trivial identity model), each
in its own monkey-patched process, alternating with the plain client so that drift hits all
of them:

- ``init_gevent``: the SDK's sync client with ``grpc.experimental.gevent.init_gevent()``
  (what the Locust user does): each blocking call waits in gevent's thread pool.
- ``threadpool``: no init_gevent; each whole SDK call runs in gevent's thread pool.
- ``aio_greenlet``: tritonclient's asyncio client on an asyncio loop running in a greenlet
  (gevent's selector), its poller thread made native.
- ``future_shared``: tritonclient's sync ``async_infer`` (a gRPC future) on one channel per
  process, whose spin thread is made native; completions reach the greenlets through one
  ``hub.loop.async_`` watcher.

The native threads come from swapping ``threading.Thread`` while gRPC starts its thread:
an experiment, not a supported use of grpcio. Writes benchmarks/results/loadgen_bridges.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import markdown_table, report_header
from triton_kit.benchmarks.loadgen.run import MODEL, SENTENCE, WARMUP_S, write_identity_repository

ROOT = Path(__file__).resolve().parents[3]
BRIDGES = ("init_gevent", "threadpool", "aio_greenlet", "future_shared")


def _native_thread_class() -> type:
    from gevent import monkey

    start = monkey.get_original("_thread", "start_new_thread")

    class NativeThread:
        """Just what grpcio asks of a thread: started on a real OS thread."""

        def __init__(self, target=None, args=(), kwargs=None, **_ignored):
            self._call = lambda: target(*args, **(kwargs or {}))

        def start(self) -> None:
            start(self._call, ())

        def join(self, timeout: float | None = None) -> None:
            return None

        def is_alive(self) -> bool:
            return True

    return NativeThread


class _Native:
    """``with _Native():`` threads gRPC starts inside are native, not greenlets."""

    cls: type | None = None

    def __enter__(self) -> None:
        import threading

        _Native.cls = _Native.cls or _native_thread_class()
        self.saved = threading.Thread
        threading.Thread = _Native.cls  # type: ignore[misc]

    def __exit__(self, *exc: object) -> None:
        import threading

        threading.Thread = self.saved  # type: ignore[misc]


def _text_input(module):
    tensor = module.InferInput("TEXT", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[SENTENCE.encode()]], dtype=np.object_))
    return tensor


def _callers(bridge: str, url: str):
    """A factory of per-greenlet blocking calls for ``bridge``."""
    import gevent

    address = url.split("://", 1)[1]
    hub = gevent.get_hub()
    if bridge in ("init_gevent", "threadpool"):
        if bridge == "init_gevent":
            import grpc.experimental.gevent as grpc_gevent

            grpc_gevent.init_gevent()
        hub.threadpool.maxsize = 64
        from triton_kit.client import TritonClient

        def make():
            client = TritonClient(url, models={"embed": MODEL}, retry=0)
            if bridge == "init_gevent":
                return lambda: client.embed(SENTENCE)
            return lambda: hub.threadpool.apply(client.embed, (SENTENCE,))

        return make
    if bridge == "aio_greenlet":
        import asyncio

        import tritonclient.grpc.aio as aio
        from gevent.event import AsyncResult

        loop = asyncio.new_event_loop()
        gevent.spawn(loop.run_forever)

        def submit(factory):
            result = AsyncResult()

            def start() -> None:
                future = asyncio.ensure_future(factory(), loop=loop)
                future.add_done_callback(
                    lambda f: (
                        result.set_exception(f.exception())
                        if f.exception()
                        else result.set(f.result())
                    )
                )

            loop.call_soon_threadsafe(start)
            return result.get()

        async def open_client():
            with _Native():
                client = aio.InferenceServerClient(address)
                await client.is_server_ready()
            return client

        async def infer(client):
            result = await client.infer(MODEL, [_text_input(aio)])
            return result.as_numpy("EMBEDDING")

        def make():
            client = submit(open_client)
            return lambda: submit(lambda: infer(client))

        return make
    import collections

    import tritonclient.grpc as grpcclient
    from gevent.hub import Waiter

    done: collections.deque = collections.deque()

    def drain() -> None:
        while done:
            waiter, result, error = done.popleft()
            if error is None:
                waiter.switch(result)
            else:
                waiter.throw(error)

    watcher = hub.loop.async_()
    watcher.start(drain)
    shared = grpcclient.InferenceServerClient(address)

    def call():
        waiter = Waiter()

        def finished(result, error) -> None:
            done.append((waiter, result, error))
            watcher.send()

        with _Native():
            shared.async_infer(MODEL, [_text_input(grpcclient)], callback=finished)
        return waiter.get().as_numpy("EMBEDDING")

    return lambda: call


def run_bridge(bridge: str, url: str, concurrency: int, duration: float) -> dict[str, float]:
    """Closed loops in greenlets; runs in its own monkey-patched process."""
    from gevent import monkey

    monkey.patch_all()
    import gevent

    make = _callers(bridge, url)
    latencies: list[float] = []
    measure_from = time.perf_counter() + WARMUP_S
    stop_at = measure_from + duration

    def loop() -> None:
        call = make()
        while (started := time.perf_counter()) < stop_at:
            call()
            if started >= measure_from:
                latencies.append(time.perf_counter() - started)

    greenlets = [gevent.spawn(loop) for _ in range(concurrency)]
    gevent.sleep(max(0.0, measure_from - time.perf_counter()))
    first = time.process_time()
    gevent.sleep(max(0.0, stop_at - time.perf_counter()))
    cpu = time.process_time() - first
    gevent.joinall(greenlets, raise_error=True)
    samples = np.array(latencies) * 1000.0
    return {
        "requests": len(latencies),
        "rps": len(latencies) / duration,
        "p99_ms": float(np.percentile(samples, 99)),
        "cpu_ms_per_request": 1000.0 * cpu / max(len(latencies), 1),
    }


def measure(kind: str, url: str, concurrency: int, duration: float) -> dict[str, float]:
    if kind == "plain":
        command = [sys.executable, "-m", "triton_kit.benchmarks.loadgen", "plain"]
    else:
        command = [
            sys.executable,
            "-m",
            "triton_kit.benchmarks.loadgen.bridges",
            "bridge",
            "--name",
            kind,
        ]
    command += ["--url", url, "--concurrency", str(concurrency), "--duration", str(duration)]
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=duration + 60, check=True
        )
    except subprocess.TimeoutExpired:  # a bridge that deadlocks is a finding, not a crash
        return {"requests": 0, "rps": float("nan"), "p99_ms": float("nan"),
                "cpu_ms_per_request": float("nan"), "hung": 1}  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def calibrate(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    from triton_kit.server import ServerConfig, TritonServer

    rows: dict[str, list[dict[str, float]]] = {kind: [] for kind in ("plain", *args.bridges)}
    with tempfile.TemporaryDirectory(prefix="bridges-") as tmp:
        repository = write_identity_repository(Path(tmp) / "repository")
        config = ServerConfig(
            model_repository=repository, http_port=0, grpc_port=0, metrics_port=0,
            log_file=Path(tmp) / "tritonserver.log",
        )  # fmt: skip
        with TritonServer(config) as server:
            for _ in range(args.repeats):
                for kind in rows:
                    row = measure(kind, server.grpc_url, args.concurrency, args.duration)
                    print(f"{kind}: {row['rps']:.0f} req/s", flush=True)
                    print(json.dumps({"kind": kind, **row}), file=sys.stderr, flush=True)
                    rows[kind].append(row)
    return rows


def report(rows: dict[str, list[dict[str, float]]], args: argparse.Namespace, started: str) -> str:
    plain_rps = float(np.mean([r["rps"] for r in rows["plain"]]))
    table = []
    for kind, points in rows.items():
        ran = [p for p in points if not p.get("hung")]
        hung = f"{len(points) - len(ran)} of {len(points)}"
        if not ran:
            table.append([kind, "-", "-", "-", "-", hung])
            continue
        rps = float(np.mean([p["rps"] for p in ran]))
        cpu = float(np.mean([p["cpu_ms_per_request"] for p in ran]))
        p99 = float(np.mean([p["p99_ms"] for p in ran]))
        table.append(
            [kind, round(rps), round(rps / plain_rps, 2), round(cpu, 3), round(p99, 2), hung]
        )
    headers = ["generator", "req/s", "/ plain", "client CPU ms/req", "p99 ms", "rounds hung"]
    header = report_header(
        "gRPC from gevent: bridges measured",
        command="python -m triton_kit.benchmarks.loadgen.bridges",
        load=f"{args.concurrency} closed loops, {args.repeats} rounds of {args.duration:g} s; "
        "no GPU, the server shares the cores and other work adds noise (compare the ratios, "
        "measured in the same run)",
        date=started,
    )
    return f"""{header}
{args.concurrency} closed loops (greenlets; asyncio tasks for `plain`) on the identity model
over gRPC, {args.duration:g} s measured after {WARMUP_S:g} s warm-up, {args.repeats} rounds
alternating the generators; means over the rounds. `plain` is tritonclient's asyncio client
(as in benchmarks/results/loadgen.md); the bridges are described in the module docstring. Only
`init_gevent` and `threadpool` go through the kit's SDK; the two others call tritonclient
directly, so they bound what a bridge under the SDK could reach. A round that did not end
within 60 s of its schedule counts as hung (killed; left out of the means).

{markdown_table(headers, table)}
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m triton_kit.benchmarks.loadgen.bridges")
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("bridge", help="internal: one bridge measurement, JSON out")
    one.add_argument("--name", choices=BRIDGES, required=True)
    one.add_argument("--url", required=True)
    one.add_argument("--concurrency", type=int, default=16)
    one.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bridges", default=",".join(BRIDGES))
    parser.add_argument("--output", type=Path, default=RESULTS / "loadgen_bridges.md")
    args = parser.parse_args(argv)
    if args.command != "bridge":
        args.bridges = args.bridges.split(",")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "bridge":
        row = run_bridge(args.name, args.url, args.concurrency, args.duration)
        print(json.dumps(row), flush=True)
        import os

        os._exit(0)  # native gRPC threads are not joined
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = report(calibrate(args), args, started)
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
