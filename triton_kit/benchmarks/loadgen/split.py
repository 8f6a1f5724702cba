"""Where the Locust gRPC user's CPU goes: the SDK over a sidecar, without Locust.

Run by ``triton_kit.benchmarks.loadgen`` as a subprocess (it patches the process with
gevent): N greenlets in closed loops call ``TritonClient.embed`` through
``triton_kit.loadtest.sidecar.client``, as the Locust user does, but with no Locust around
them. It reports the CPU time per request of this process (the SDK, protobuf and framing)
and of the sidecar (``--kind``: the native one or the Python one, grpc.aio) apart, so that
the Locust run's total can be split into SDK, sidecar and Locust itself.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys


def measure(url: str, concurrency: int, duration: float, model: str, text: str, kind: str) -> dict:
    from gevent import monkey

    monkey.patch_all()
    import functools
    import time

    import gevent

    from triton_kit.benchmarks.harness.measure import closed_loop_summary
    from triton_kit.benchmarks.loadgen.run import WARMUP_S
    from triton_kit.client import TritonClient
    from triton_kit.loadtest.sidecar import client as sidecar_client

    latencies: list[float] = []
    measure_from = time.perf_counter() + WARMUP_S
    stop_at = measure_from + duration
    factory = functools.partial(sidecar_client.factory, kind=kind)
    clients = [
        TritonClient(url, models={"embed": model}, retry=0, client_factory=factory)
        for _ in range(concurrency)
    ]

    def loop(client: TritonClient) -> None:
        while (started := time.perf_counter()) < stop_at:
            client.embed(text)
            if started >= measure_from:
                latencies.append(time.perf_counter() - started)

    def window() -> tuple[float, float, float, float]:
        gevent.sleep(max(0.0, measure_from - time.perf_counter()))
        first = (time.process_time(), sidecar_client.cpu_seconds())
        gevent.sleep(max(0.0, stop_at - time.perf_counter()))
        return (*first, time.process_time(), sidecar_client.cpu_seconds())

    timer = gevent.spawn(window)
    gevent.joinall([gevent.spawn(loop, client) for client in clients], raise_error=True)
    own_0, side_0, own_1, side_1 = timer.get()
    sidecar_client.close_all()
    count = max(len(latencies), 1)
    return {
        **closed_loop_summary(latencies, duration),
        "process_cpu_ms_per_request": 1000.0 * (own_1 - own_0) / count,
        "sidecar_cpu_ms_per_request": 1000.0 * (side_1 - side_0) / count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triton_kit.benchmarks.loadgen.split")
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--kind", choices=("native", "python"), default="native")
    args = parser.parse_args(argv)
    row = measure(args.url, args.concurrency, args.duration, args.model, args.text, args.kind)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
