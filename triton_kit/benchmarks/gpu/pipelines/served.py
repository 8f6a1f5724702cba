"""The built repository served by the kit's launcher, measured the two ways users call it.

- perf_analyzer (Triton's C++ load generator, gRPC): one-item requests of real data at each
  concurrency, after an untimed warm-up at that concurrency; Triton's statistics of every
  model the requests went through, read just before and just after the measured windows, say
  which step of an ensemble (or which model behind a BLS call) holds the time.
- the SDK (``triton_kit.client.TritonClient``): one call at a time, then the batch method
  (one request per item, sent concurrently by the SDK's threads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from triton_kit.benchmarks.gpu.load import stats
from triton_kit.benchmarks.gpu.pipelines.inputs import Requests
from triton_kit.benchmarks.gpu.pipelines.options import Options
from triton_kit.benchmarks.harness import perf_analyzer
from triton_kit.loadtest.triton_stats import ModelCounters, StatsProbe, window

WARM_S = 1.0  # perf_analyzer's window for the untimed warm-up at each concurrency
RETRY_STABILITY = 50  # % for the second try, with windows twice as long
STARTUP_TIMEOUT_S = 300.0  # every model of every family loads, python stubs import torch
SDK_BATCH, SMOKE_SDK_BATCH = 64, 2
SDK_METHODS = {"resnet50": "classify", "bert": "embed"}  # the models the SDK pass calls


@contextmanager
def server(repo: Path, out: Path) -> Iterator[str]:
    """The kit's launcher (``triton_kit.server``'s Python API, its default flags) on free
    ports; yields the gRPC address (host:port)."""
    from triton_kit.server.launcher import ServerConfig, TritonServer

    config = ServerConfig(
        model_repository=repo,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=out / "tritonserver.log",
        startup_timeout_s=STARTUP_TIMEOUT_S,
    )
    with TritonServer(config) as running:
        yield running.grpc_url.removeprefix("grpc://")


def instance_counts(repo: Path) -> dict[str, int]:
    """Instances per model as configured (0 for an ensemble: it executes nothing itself)."""
    from triton_kit.build_engines.repository import parse

    counts = {}
    for path in sorted(repo.glob("*/config.pbtxt")):
        config = parse(path.read_text())
        counts[path.parent.name] = sum(group.count for group in config.instance_group)
    return counts


def step_statistics(
    deltas: dict[str, ModelCounters], wall_s: float, instances: dict[str, int]
) -> dict[str, dict]:
    """Per model the requests went through: Triton's own averages per request (ms), the
    rows an execution carried, and how busy its instances were over the window."""
    rows = {}
    for name, counters in deltas.items():
        requests = max(counters.success_count, 1)
        executions = max(counters.execution_count, 1)
        compute_ns = (
            counters.compute_input_ns + counters.compute_infer_ns + counters.compute_output_ns
        )
        count = instances.get(name, 0)
        # Every request of an execution is charged the whole execution: compute per request
        # times executions is the time the instances spent executing.
        busy_s = compute_ns / requests * counters.execution_count / 1e9
        rows[name] = {
            "requests": counters.success_count,
            "failed": counters.fail_count,
            "executions": counters.execution_count,
            "requests_per_execution": round(counters.success_count / executions, 2),
            "rows_per_execution": round(counters.inference_count / executions, 2),
            "queue_ms": round(counters.queue_ns / requests / 1e6, 3),
            "compute_input_ms": round(counters.compute_input_ns / requests / 1e6, 3),
            "compute_infer_ms": round(counters.compute_infer_ns / requests / 1e6, 3),
            "compute_output_ms": round(counters.compute_output_ns / requests / 1e6, 3),
            "instances": count,
            "busy": round(busy_s / (count * wall_s), 3) if count and wall_s > 0 else None,
        }
    return rows


def perf_level(
    url: str, requests: Requests, concurrency: int, options: Options, instances: dict[str, int]
) -> dict:
    """One concurrency: an untimed warm-up, then the measured windows with Triton's
    statistics around them (a retry with longer windows and a looser bound if they did not
    settle)."""
    model, data = requests.model, requests.input_file
    perf_analyzer.run(url, model, concurrency, WARM_S, options.out, data, stability=100)
    probe = StatsProbe(f"grpc://{url}")
    try:
        before, start = probe.snapshot(), time.perf_counter()
        row = perf_analyzer.run(
            url, model, concurrency, options.seconds, options.out, data, options.stability
        )
        if "error" in row:  # not settled: a shared host's noise, not the server's cost
            looser = max(options.stability, RETRY_STABILITY)
            row = perf_analyzer.run(
                url, model, concurrency, 2 * options.seconds, options.out, data, looser
            )
            row["retried"] = True
        wall_s = time.perf_counter() - start
        after = probe.snapshot()
    finally:
        probe.close()
    if "items_per_s" not in row:
        why = row.get("error") or row.get("skipped") or str(row)
        raise RuntimeError(f"perf_analyzer {model} c{concurrency}: {why.strip()}")
    row["concurrency"] = concurrency
    row["wall_s"] = round(wall_s, 1)
    row["steps"] = step_statistics(window(before, after), wall_s, instances)
    return row


def perf_levels(
    url: str,
    requests: Requests,
    options: Options,
    repo: Path,
    time_left: Callable[[], float],
) -> dict:
    """Every concurrency of the model, in order, while the run's time budget lasts; a level
    perf_analyzer could not measure is a row with its error, and the next level still runs."""
    instances = instance_counts(repo)
    rows: dict[str, Any] = {}
    for level in options.levels(requests.model):
        key = f"c{level}"
        if time_left() <= 0:
            rows[key] = {"skipped": "time budget spent"}
            continue
        try:
            rows[key] = perf_level(url, requests, level, options, instances)
        except RuntimeError as exc:
            rows[key] = {"error": str(exc)[-1500:]}
        print(requests.model, key, _brief(rows[key]), flush=True)
    return rows


def _brief(row: dict) -> str:
    if "items_per_s" not in row:
        return row["error"][-300:]
    return f"{row['items_per_s']:.1f} items/s, p50 {row['p50']:.2f} ms"


def sdk_pass(url: str, requests: Requests, options: Options) -> dict:
    """The typed client: ``seconds`` of one call at a time, then of batch calls."""
    from triton_kit.client import TritonClient

    method = SDK_METHODS[requests.model]
    batch = SMOKE_SDK_BATCH if options.smoke else SDK_BATCH
    items = list(requests.items)
    with TritonClient(f"grpc://{url}", max_concurrency=batch) as client:
        one = getattr(client, method)
        many = client.classify_batch if method == "classify" else one
        sequential = _timed_calls(lambda i: one(items[i % len(items)]), options.seconds)
        chosen = [items[i % len(items)] for i in range(batch)]
        batched = _timed_calls(lambda _: many(chosen), options.seconds)  # raises on errors
    return {
        "method": method,
        "sequential": {**sequential, "items_per_s": sequential["calls_per_s"]},
        f"batch{batch}": {**batched, "items_per_s": batched["calls_per_s"] * batch},
    }


def _timed_calls(call: Callable[[int], Any], seconds: float, minimum: int = 3) -> dict:
    call(0)  # untimed: connection and first-use costs
    latencies: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(latencies) < minimum:
        start = time.perf_counter()
        call(len(latencies) + 1)
        latencies.append(time.perf_counter() - start)
    calls = len(latencies)
    return {**stats(latencies), "calls": calls, "calls_per_s": calls / sum(latencies)}
