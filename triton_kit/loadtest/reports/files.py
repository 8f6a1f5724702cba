"""Write the summary (JSON, CSV, Markdown) and the PNG plots of a stepped run."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from triton_kit.loadtest import metadata
from triton_kit.loadtest.metadata import RunMetadata
from triton_kit.loadtest.reports.slo import MIN_P99_SAMPLES, Capacity, Slo, capacities
from triton_kit.loadtest.reports.summary import PERCENTILES, StepResult

COLUMNS = (
    "protocol", "model", "users", "requests", "failures", "error_ratio", "throughput_rps",
    "p50_ms", "p90_ms", "p95_ms", "p99_ms", "server_queue_ms", "server_compute_ms",
    "client_cpu_ratio", "stable",
)  # fmt: skip


def _row(result: StepResult) -> dict[str, object]:
    queue, compute = result.server_split_ms
    row = {key: value for key, value in result.as_dict().items() if key in COLUMNS}
    return {**row, "server_queue_ms": queue, "server_compute_ms": compute}


def ordered(results: Sequence[StepResult]) -> list[StepResult]:
    return sorted(results, key=lambda r: (r.protocol, r.users, r.model))


def write_tables(
    results: Sequence[StepResult],
    out: Path,
    slo: Slo | None = None,
    meta: RunMetadata | None = None,
) -> list[Path]:
    """summary.json/.csv/.md; with ``meta``, metadata.json too (and a Run section in .md)."""
    out.mkdir(parents=True, exist_ok=True)
    results = ordered(results)
    rows = [_row(r) for r in results]
    (out / "summary.json").write_text(json.dumps([r.as_dict() for r in results], indent=2))
    written = [out / "summary.json", out / "summary.csv", out / "summary.md"]
    if meta is not None:
        (out / "metadata.json").write_text(json.dumps(meta.as_dict(), indent=2))
        written.append(out / "metadata.json")
    with open(out / "summary.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    text = markdown(results)
    if slo is not None and slo.p99_ms is not None:
        text += "\n" + capacity_markdown(capacities(results, slo))
    if meta is not None:
        text += "\n" + metadata.markdown(meta)
    (out / "summary.md").write_text(text)
    return written


def capacity_markdown(found: Sequence[Capacity]) -> str:
    """model_analyzer's answer, one line per protocol and model."""
    lines = ["## Highest load within the p99 SLO", ""]
    lines += [f"- {c.sentence()}" for c in found]
    lines += ["", f"A step counts when its p99 rests on at least {MIN_P99_SAMPLES} requests "]
    lines[-1] += "and its error ratio meets the error SLO, if one is set."
    return "\n".join(lines) + "\n"


def p99_cell(result: StepResult) -> str:
    """The p99, with a dagger when the step had too few samples to estimate it."""
    flag = " †" if result.requests < MIN_P99_SAMPLES else ""
    return f"{result.p99_ms:.2f}{flag}"


def stable_cell(result: StepResult) -> str:
    return {None: "-", True: "yes", False: "no"}[result.stable]


def markdown(results: Sequence[StepResult]) -> str:
    """Client latency and throughput per step, then Triton's queue/compute split per model."""
    lines = [
        "| protocol | model | users | req | err % | req/s | p50 ms | p90 ms | p95 ms | p99 ms "
        "| queue ms | compute ms | Locust CPU % | stable |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    for r in results:
        queue, compute = r.server_split_ms
        lines.append(
            f"| {r.protocol} | {r.model} | {r.users} | {r.requests} | {100 * r.error_ratio:.2f} "
            f"| {r.throughput_rps:.1f} | {r.p50_ms:.2f} | {r.p90_ms:.2f} | {r.p95_ms:.2f} "
            f"| {p99_cell(r)} | {queue:.2f} | {compute:.2f} | {100 * r.client_cpu_ratio:.0f} "
            f"| {stable_cell(r)} |"
        )
    lines += [
        "",
        "Latency and throughput are client-side, over each step's window after settling. "
        "Queue and compute are Triton's mean per request of the model called, over the same "
        "window, summed over the models it composes (ensemble steps, BLS calls): queue is "
        "time waiting in any of their queues, compute the rest. Locust CPU % is the load "
        "generator's own CPU in the window (all models of the step share it), its gRPC "
        "sidecar's included, so it may pass 100 %; near 100 % per process the generator, "
        "not the server, limits the rate.",
        "",
        f"† fewer than {MIN_P99_SAMPLES} requests in the window: that p99 is close to the "
        "maximum, not an estimate to act on.",
        "",
        "stable: whether the step met the stability rule (`--stability-window`; perf_analyzer's "
        "method) over its last windows: throughput and p99 of every model within the tolerance "
        "of their mean over consecutive windows, each with the minimum sample count; `no` means "
        "it ran to `--step-time` without settling, `-` that no rule was set. The numbers cover "
        "the step's whole window after settling.",
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
    for r in sorted(results, key=lambda r: r.users):
        series.setdefault((r.protocol, r.model), []).append(r)
    return series


# One colour per protocol and percentile (tab20 pairs: dark = p99 end, light = p50 end), so
# no two lines of a panel share a colour; the line style repeats the percentile.
PERCENTILE_COLOURS = {
    "grpc": {50: "#9ecae1", 90: "#4292c6", 95: "#2171b5", 99: "#08306b"},
    "http": {50: "#fdae6b", 90: "#f16913", 95: "#d94801", 99: "#7f2704"},
}
PERCENTILE_STYLES = {50: "-", 90: "--", 95: "-.", 99: ":"}
OTHER_COLOURS = {50: "#a1d99b", 90: "#41ab5d", 95: "#238b45", 99: "#00441b"}
CURVE_PERCENTILES = (50, 99)
SLO_COLOUR = "#d62728"


def _colour(protocol: str, percentile: int) -> str:
    return PERCENTILE_COLOURS.get(protocol, OTHER_COLOURS)[percentile]


def write_plots(
    results: Sequence[StepResult], out: Path, slo_p99_ms: float | None = None
) -> list[Path]:
    """latency.png and curve.png (one panel per model) and throughput.png."""
    import matplotlib

    matplotlib.use("Agg")
    series = _series(results)
    models = sorted({model for _, model in series})
    if not models:
        return []
    paths = [
        _panels(out / "latency.png", series, models, slo_p99_ms, by_throughput=False),
        _panels(out / "curve.png", series, models, slo_p99_ms, by_throughput=True),
        _throughput(out / "throughput.png", series, models),
    ]
    return paths


def _panels(
    path: Path,
    series: dict[tuple[str, str], list[StepResult]],
    models: list[str],
    slo_p99_ms: float | None,
    by_throughput: bool,
) -> Path:
    """Percentiles against users, or against throughput (the latency-vs-throughput curve)."""
    import matplotlib.pyplot as plt

    percentiles = CURVE_PERCENTILES if by_throughput else PERCENTILES
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models) + 2, 4.2), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        for (protocol, name), rows in sorted(series.items()):
            if name != model:
                continue
            x = [r.throughput_rps if by_throughput else r.users for r in rows]
            for p in percentiles:
                ax.plot(x, [getattr(r, f"p{p}_ms") for r in rows], PERCENTILE_STYLES[p],
                        marker="o", color=_colour(protocol, p),
                        label=f"{protocol} p{p}")  # fmt: skip
            if by_throughput:
                for r, xv in zip(rows, x, strict=True):
                    ax.annotate(str(r.users), (xv, r.p99_ms), fontsize=7,
                                xytext=(3, 3), textcoords="offset points")  # fmt: skip
        if slo_p99_ms is not None:
            label = f"SLO p99 {slo_p99_ms:g} ms"
            ax.axhline(slo_p99_ms, color=SLO_COLOUR, linewidth=1.5, label=label)
        title = f"{model}: latency vs throughput" if by_throughput else f"{model}: latency"
        xlabel = "throughput (requests/s; labels: users)" if by_throughput else None
        _axes(ax, title, "latency (ms)", xlabel=xlabel, log_x=not by_throughput)
    _legend_outside(fig, axes[0][-1])
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _throughput(
    path: Path, series: dict[tuple[str, str], list[StepResult]], models: list[str]
) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colours = {model: f"C{i}" for i, model in enumerate(models)}
    for (protocol, model), rows in sorted(series.items()):
        style = "-" if protocol == "grpc" else "--"
        ax.plot([r.users for r in rows], [r.throughput_rps for r in rows], style, marker="o",
                color=colours[model], label=f"{model} {protocol}")  # fmt: skip
    _axes(ax, "throughput", "requests/s")
    _legend_outside(fig, ax)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _legend_outside(fig, ax) -> None:
    """One legend right of the panels, so it never covers data."""
    handles, labels = [], []
    for axis in fig.axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    fig.tight_layout()


def _axes(ax, title: str, ylabel: str, xlabel: str | None = None, log_x: bool = True) -> None:
    import matplotlib.ticker

    ax.set_title(title)
    ax.set_xlabel(xlabel or "concurrent users per model")
    ax.set_ylabel(ylabel)
    if log_x:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
