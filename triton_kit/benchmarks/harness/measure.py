"""Measurement helpers shared by the benchmarks: timed loops, percentiles, the machine, tables,
and the header every report opens with."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Result:
    """Latencies of one configuration; throughput counts items (images, sentences), not calls."""

    name: str
    concurrency: int
    latencies_s: tuple[float, ...]
    items: int
    wall_s: float
    cpu_s: float = float("nan")  # this process's CPU time over the measured window (warm-up out)

    @property
    def throughput(self) -> float:
        return self.items / self.wall_s if self.wall_s else 0.0

    def plus(self, other: Result) -> Result:
        """Two runs of one configuration as one (e.g. halves measured either side of another
        engine, so that drift in the machine's load hits both engines alike)."""
        return Result(
            self.name,
            self.concurrency,
            self.latencies_s + other.latencies_s,
            self.items + other.items,
            self.wall_s + other.wall_s,
            self.cpu_s + other.cpu_s,
        )

    def percentile_ms(self, q: float) -> float:
        return (
            float(np.percentile(self.latencies_s, q) * 1000) if self.latencies_s else float("nan")
        )


def run_sync(name: str, call: Callable[[], int], duration_s: float, warmup: int = 2) -> Result:
    """Call repeatedly for ``duration_s``; ``call`` returns how many items it processed."""
    for _ in range(warmup):
        call()
    latencies, items = [], 0
    cpu, start = time.process_time(), time.perf_counter()
    while time.perf_counter() - start < duration_s:
        t0 = time.perf_counter()
        items += call()
        latencies.append(time.perf_counter() - t0)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Result(name, 1, tuple(latencies), items, wall, cpu)


def run_threads(
    name: str, calls: Sequence[Callable[[], int]], duration_s: float, warmup: int = 2
) -> Result:
    """Each of ``calls`` in a closed loop on its own thread for ``duration_s`` (several
    in-process sessions at once, as a served model's instances run: ONNX Runtime releases the
    GIL); each call returns how many items it processed. Concurrency = ``len(calls)``."""
    latencies: list[float] = []
    items = [0] * len(calls)
    stop_at = [0.0]

    cpu = [0.0]

    def open_window() -> None:  # runs once, when every loop has warmed up
        cpu[0] = time.process_time()
        stop_at[0] = time.perf_counter() + duration_s

    start = threading.Barrier(len(calls) + 1, action=open_window)

    def loop(index: int, call: Callable[[], int]) -> None:
        for _ in range(warmup):
            call()
        start.wait()
        mine = []
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            items[index] += call()
            mine.append(time.perf_counter() - t0)
        latencies.extend(mine)

    threads = [threading.Thread(target=loop, args=pair) for pair in enumerate(calls)]
    for thread in threads:
        thread.start()
    start.wait()
    began = stop_at[0] - duration_s
    for thread in threads:
        thread.join()
    wall, cpu_s = time.perf_counter() - began, time.process_time() - cpu[0]
    return Result(name, len(calls), tuple(latencies), sum(items), wall, cpu_s)


async def run_concurrent(
    name: str,
    call: Callable[[int], Awaitable[int]],
    concurrency: int,
    duration_s: float,
    warmup_s: float = 2.0,
) -> Result:
    """``concurrency`` closed loops after a warm-up; ``call(i)`` returns its item count."""
    latencies: list[float] = []
    items = 0
    measuring = False
    stop_at = time.perf_counter() + warmup_s + duration_s

    async def worker(worker_id: int) -> None:
        nonlocal items
        i = worker_id
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            n = await call(i)
            if measuring:
                latencies.append(time.perf_counter() - t0)
                items += n
            i += concurrency

    async def start_measuring() -> float:
        nonlocal measuring
        await asyncio.sleep(warmup_s)
        measuring = True
        return time.perf_counter()

    tasks = [asyncio.create_task(worker(i)) for i in range(concurrency)]
    measure_start = await start_measuring()
    await asyncio.gather(*tasks)
    return Result(name, concurrency, tuple(latencies), items, time.perf_counter() - measure_start)


def children_cpu_seconds() -> float:
    """CPU time so far of this process's live children (the tritonserver and its backend
    stubs; a client such as perf_analyzer counts only while it runs)."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; 1-min load average at start {load:.2f}"
    )


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    def fmt(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def result_row(result: Result) -> list[object]:
    return [
        result.name,
        result.concurrency,
        round(result.throughput, 2),
        round(result.percentile_ms(50), 1),
        round(result.percentile_ms(95), 1),
        round(result.percentile_ms(99), 1),
        len(result.latencies_s),
    ]


RESULT_HEADERS = ["configuration", "concurrency", "items/s", "p50 ms", "p95 ms", "p99 ms", "calls"]


def closed_loop_summary(latencies_s: list[float], duration_s: float) -> dict[str, float]:
    """Requests, rate and p50/p99 (ms) of one closed-loop window; NaN percentiles if empty."""
    samples = np.array(latencies_s) * 1000.0
    return {
        "requests": len(latencies_s),
        "rps": len(latencies_s) / duration_s,
        "p50_ms": float(np.percentile(samples, 50)) if len(samples) else float("nan"),
        "p99_ms": float(np.percentile(samples, 99)) if len(samples) else float("nan"),
    }


def git_revision() -> str:
    """The checkout's commit, short, ``-dirty`` when it has uncommitted changes; a copy
    without ``.git`` (the lent GPU machine) reads it from ``TRITON_KIT_COMMIT``."""
    if os.environ.get("TRITON_KIT_COMMIT"):
        return os.environ["TRITON_KIT_COMMIT"]
    root = Path(__file__).resolve().parents[3]
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    return (head.stdout.strip() or "unknown") + ("-dirty" if dirty.stdout.strip() else "")


def report_header(
    title: str,
    command: str,
    load: str,
    machine: str | None = None,
    date: str | None = None,
    commit: str | None = None,
) -> str:
    """The head of every benchmark report: one run's machine, load, command, date and commit
    (the tables and findings follow it). Defaults describe the run that is writing it."""
    rows: list[list[object]] = [
        ["machine", machine or machine_description()],
        ["load", load],
        ["command", f"`{command}`"],
        ["date", date or f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC"],
        ["commit", f"`{commit or git_revision()}`"],
    ]
    return f"# {title}\n\n" + markdown_table(["run", ""], rows) + "\n"


def runs_table(rows: list[tuple[str, str, str, str]]) -> str:
    """For a report whose sections come from different runs: one row per section
    (section, run date, host, commit), placed under the header instead of prose."""
    return markdown_table(
        ["section", "run date", "host", "commit"],
        [[section, date, host, f"`{commit}`"] for section, date, host, commit in rows],
    )


DISCUSSION = "## Discussion"


def write_keeping_discussion(path: Path, generated: str) -> None:
    """Write a regenerated report, keeping the hand-written part of the old one: everything
    from its ``## Discussion`` heading on."""
    old = path.read_text() if path.exists() else ""
    kept = old[old.index(DISCUSSION) :] if DISCUSSION in old else f"{DISCUSSION}\n\n(none)\n"
    path.write_text(generated.rstrip("\n") + "\n\n" + kept)
