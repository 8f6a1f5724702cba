"""Soak: mixed traffic at a fraction of measured max throughput; errors, p99 drift, RSS growth.

Calibrates the closed-loop maximum on the same mix first, then paces requests
open-loop at ``--load`` of it for ``--minutes``, and reports per-window p99, the
error count, and the RSS of tritonserver and each python stub after warm-up and
at the end. ``make soak`` runs it (SOAK_MINUTES, default 30).
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from triton_kit.benchmarks.harness.measure import report_header
from triton_kit.benchmarks.harness.memory import server_tree_rss
from triton_kit.client import TritonClient
from triton_kit.server import ServerConfig, TritonServer

SENTENCES = ["I have 3 cats.", "The meeting is at 10 o'clock.", "She bought 12 apples today."]


def _jpeg() -> bytes:
    pixels = np.random.default_rng(0).integers(0, 255, (240, 320, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG")
    return out.getvalue()


def _calls(url: str):
    image = _jpeg()
    local = threading.local()

    def client() -> TritonClient:
        if not hasattr(local, "client"):
            local.client = TritonClient(url, timeout=60)
        return local.client

    return [
        lambda: client().classify(image),
        lambda: client().embed(SENTENCES[0]),
        lambda: client().translate(SENTENCES[1], beam_size=1),
    ]


@dataclass
class Tally:
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, call) -> None:
        start = time.perf_counter()
        try:
            call()
            with self.lock:
                self.latencies.append((start, time.perf_counter() - start))
        except Exception as exc:
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])


def max_throughput(calls, seconds: float, workers: int) -> float:
    tally, stop = Tally(), time.monotonic() + seconds

    def loop(offset: int) -> None:
        i = offset
        while time.monotonic() < stop:
            tally.run(calls[i % len(calls)])
            i += 1

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(loop, range(workers)))
    return len(tally.latencies) / seconds


def rss_by_process(server: TritonServer) -> dict[str, float]:
    rows = server_tree_rss(server._process.pid)
    return {f"{row.pid} {row.label[-40:]}": row.rss_mib for row in rows}


class LoadSampler:
    """Samples the 1-minute load average, so a noisy shared machine shows in the report,
    and RSS per process every ``rss_every`` seconds, to tell late warm-up from a leak."""

    def __init__(self, rss=None, every: float = 10.0, rss_every: float = 300.0) -> None:
        self.samples: list[tuple[float, float]] = []  # (perf_counter, 1-minute loadavg)
        self.rss: list[dict[str, float]] = []
        self._rss_fn, self._rss_every = rss, rss_every
        self._every, self._stop = every, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        next_rss = time.perf_counter() + self._rss_every
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), os.getloadavg()[0]))
            if self._rss_fn is not None and time.perf_counter() >= next_rss:
                self.rss.append(self._rss_fn())
                next_rss += self._rss_every
            self._stop.wait(self._every)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def paced(calls, rate: float, seconds: float, workers: int) -> Tally:
    tally, interval = Tally(), 1.0 / rate
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        i = 0
        while (now := time.perf_counter()) - start < seconds:
            pool.submit(tally.run, calls[i % len(calls)])
            i += 1
            time.sleep(max(0.0, start + i * interval - now))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--load", type=float, default=0.8, help="fraction of measured max")
    parser.add_argument("--calibrate-seconds", type=float, default=20.0)
    parser.add_argument("--warmup-seconds", type=float, default=120.0)
    parser.add_argument("--windows", type=int, default=6, help="p99 is reported per window")
    parser.add_argument("--model-repository", type=Path, default=ServerConfig.model_repository)
    args = parser.parse_args()
    config = ServerConfig(model_repository=args.model_repository, http_port=0, grpc_port=0,
                          metrics_port=0)  # fmt: skip
    header = report_header(
        "Soak: mixed traffic, errors, p99 drift, RSS growth",
        command=(
            f"python -m triton_kit.benchmarks.soak --minutes {args.minutes:g} --load {args.load:g}"
        ),
        load=f"{args.load:.0%} of the measured closed-loop maximum, paced open-loop after "
        f"{args.warmup_seconds:g} s of warm-up; 1-min load average before start "
        f"{os.getloadavg()[0]:.1f} (per window below)",
    )
    print(header, flush=True)
    with TritonServer(config) as server:
        calls = _calls(server.grpc_url)
        top = max_throughput(calls, args.calibrate_seconds, workers=4)
        rate = args.load * top
        print(f"max {top:.1f} req/s (4 closed-loop clients); soak at {rate:.1f} req/s", flush=True)
        paced(calls, rate, args.warmup_seconds, workers=16)
        rss_start = rss_by_process(server)
        with LoadSampler(lambda: rss_by_process(server)) as load:
            tally = paced(calls, rate, args.minutes * 60, workers=16)
        rss_end = rss_by_process(server)
    report(tally, rss_start, rss_end, args.windows, args.minutes, load.samples)
    print("\nRSS every 5 minutes (MiB), processes that grew by 2 % or more:")
    for key, start in rss_start.items():
        middle = [r.get(key, float("nan")) for r in load.rss]
        path = [start, *middle, rss_end.get(key, float("nan"))]
        if path[-1] >= start * 1.02:
            print(f"{key}: " + " -> ".join(f"{v:.0f}" for v in path))


def report(tally: Tally, rss_start, rss_end, windows: int, minutes: float, load) -> None:
    starts = np.array([s for s, _ in tally.latencies])
    lat = np.array([t for _, t in tally.latencies]) * 1000
    edges = np.linspace(starts.min(), starts.max() + 1e-9, windows + 1)
    p99s = [float(np.percentile(lat[(starts >= a) & (starts < b)], 99))
            for a, b in itertools.pairwise(edges)]  # fmt: skip
    drift = (p99s[-1] - p99s[0]) / p99s[0] * 100
    print(f"\n{minutes:g}-minute soak: {len(lat)} calls, {len(tally.errors)} errors, "
          f"p50 {np.percentile(lat, 50):.1f} ms, p99 {np.percentile(lat, 99):.1f} ms")  # fmt: skip
    print("p99 per window (ms): " + ", ".join(f"{p:.1f}" for p in p99s))
    print(f"p99 drift first->last window: {drift:+.1f} %")
    windows_load = [[v for t, v in load if a <= t < b] for a, b in itertools.pairwise(edges)]
    means = [np.mean(w) if w else np.nan for w in windows_load]
    print("1-minute loadavg per window (mean): " + ", ".join(f"{m:.1f}" for m in means))
    values = [v for _, v in load]
    print(f"1-minute loadavg: start {values[0]:.1f}, end {values[-1]:.1f}, "
          f"min {min(values):.1f}, max {max(values):.1f}")  # fmt: skip
    kinds: dict[str, int] = {}
    for error in tally.errors:
        kinds[error[:80]] = kinds.get(error[:80], 0) + 1
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"errors x{count}: {kind}")
    print("\n| process | RSS after warm-up (MiB) | RSS at end (MiB) | growth |")
    print("| --- | ---: | ---: | ---: |")
    for key, start in rss_start.items():
        end = rss_end.get(key, float("nan"))
        print(f"| {key} | {start:.0f} | {end:.0f} | {(end - start) / start * 100:+.1f} % |")


if __name__ == "__main__":
    main()
