"""Write the summary (JSON, CSV, Markdown) and the PNG plots of a stepped run."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from loadtest.summary import PERCENTILES, StepResult

COLUMNS = (
    "protocol", "model", "users", "requests", "failures", "error_ratio", "throughput_rps",
    "p50_ms", "p90_ms", "p95_ms", "p99_ms", "server_queue_ms", "server_compute_ms",
    "client_cpu_ratio",
)  # fmt: skip


PROTOCOL_COLOURS = {"grpc": "C0", "http": "C1"}


def _row(result: StepResult) -> dict[str, object]:
    queue, compute = result.server_split_ms
    row = {key: value for key, value in result.as_dict().items() if key in COLUMNS}
    return {**row, "server_queue_ms": queue, "server_compute_ms": compute}


def ordered(results: Sequence[StepResult]) -> list[StepResult]:
    return sorted(results, key=lambda r: (r.protocol, r.users, r.model))


def write_tables(results: Sequence[StepResult], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    results = ordered(results)
    rows = [_row(r) for r in results]
    (out / "summary.json").write_text(json.dumps([r.as_dict() for r in results], indent=2))
    with open(out / "summary.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (out / "summary.md").write_text(markdown(results))
    return [out / "summary.json", out / "summary.csv", out / "summary.md"]


# Below this many samples a p99 is little more than the maximum: flagged, not stated as fact.
MIN_P99_SAMPLES = 100


def p99_cell(result: StepResult) -> str:
    """The p99, with a dagger when the step had too few samples to estimate it."""
    flag = " †" if result.requests < MIN_P99_SAMPLES else ""
    return f"{result.p99_ms:.2f}{flag}"


def markdown(results: Sequence[StepResult]) -> str:
    """Client latency and throughput per step, then Triton's queue/compute split per model."""
    lines = [
        "| protocol | model | users | req | err % | req/s | p50 ms | p90 ms | p95 ms | p99 ms "
        "| queue ms | compute ms | Locust CPU % |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        queue, compute = r.server_split_ms
        lines.append(
            f"| {r.protocol} | {r.model} | {r.users} | {r.requests} | {100 * r.error_ratio:.2f} "
            f"| {r.throughput_rps:.1f} | {r.p50_ms:.2f} | {r.p90_ms:.2f} | {r.p95_ms:.2f} "
            f"| {p99_cell(r)} | {queue:.2f} | {compute:.2f} | {100 * r.client_cpu_ratio:.0f} |"
        )
    lines += [
        "",
        "Latency and throughput are client-side, over each step's window after settling. "
        "Queue and compute are Triton's mean per request of the model called, over the same "
        "window, summed over the models it composes (ensemble steps, BLS calls): queue is "
        "time waiting in any of their queues, compute the rest. Locust CPU % is the load "
        "generator's own CPU in the window (all models of the step share it); near 100 % the "
        "generator, not the server, limits the rate.",
        "",
        f"† fewer than {MIN_P99_SAMPLES} requests in the window: that p99 is close to the "
        "maximum, not an estimate to act on.",
        "",
        "Windows: this summary, the plots and the SLO check cover each step's window after "
        "its settle time. Locust's own `<protocol>/locust.html` and `locust_stats.csv` cover "
        "the whole run, settle periods and step changes included, so their percentiles differ "
        "from these.",
    ]
    lines += ["", "Server-side time per request, by Triton model (same windows; an ensemble "]
    lines += ["reports no queue, and its steps' compute summed as compute):", ""]
    lines += ["| protocol | users | Triton model | requests | queue ms | compute ms |"]
    lines += ["|---|--:|---|--:|--:|--:|"]
    for r in results:
        for s in r.server:
            lines.append(
                f"| {r.protocol} | {r.users} | {s.model} | {s.requests} | {s.queue_ms:.2f} "
                f"| {s.compute_ms:.2f} |"
            )
    return "\n".join(lines) + "\n"


def _series(results: Sequence[StepResult]) -> dict[tuple[str, str], list[StepResult]]:
    series: dict[tuple[str, str], list[StepResult]] = {}
    for r in results:
        series.setdefault((r.protocol, r.model), []).append(r)
    return series


def write_plots(results: Sequence[StepResult], out: Path) -> list[Path]:
    """latency.png (percentiles vs users, one panel per model) and throughput.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = _series(results)
    models = sorted({model for _, model in series})
    if not models:
        return []
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        for (protocol, name), rows in sorted(series.items()):
            if name != model:
                continue
            users = [r.users for r in rows]
            colour = PROTOCOL_COLOURS.get(protocol, "C2")
            for p, style in zip(PERCENTILES, ("-", "--", "-.", ":"), strict=True):
                ax.plot(users, [getattr(r, f"p{p}_ms") for r in rows], style, marker="o",
                        color=colour, label=f"{protocol} p{p}")  # fmt: skip
        _axes(ax, model, "latency (ms)")
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    colours = {model: f"C{i}" for i, model in enumerate(models)}
    for (protocol, model), rows in sorted(series.items()):
        style = "-" if protocol == "grpc" else "--"
        ax.plot([r.users for r in rows], [r.throughput_rps for r in rows], style, marker="o",
                color=colours[model], label=f"{model} {protocol}")  # fmt: skip
    _axes(ax, "throughput", "requests/s")
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)
    return [out / "latency.png", out / "throughput.png"]


def _axes(ax, title: str, ylabel: str) -> None:
    import matplotlib.ticker

    ax.set_title(title)
    ax.set_xlabel("concurrent users per model")
    ax.set_ylabel(ylabel)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
