"""pipelines.md from pipelines.json: the summary against the goal, then every served row,
Triton's statistics per step, the in-process rows, the SDK, the builds, and what failed.

Every table is written from its columns' (header, definition) pairs, so each column is
defined under its table."""

from __future__ import annotations

from collections.abc import Sequence

from triton_kit.benchmarks.gpu.pipelines.options import GOALS, MODELS
from triton_kit.benchmarks.gpu.report import header

TITLE = "What users call, end to end: served against the same pipeline in one process"
Columns = Sequence[tuple[str, str]]

MODEL = ("model", "what the client calls (an ensemble, or a python model that calls others)")
SUMMARY: Columns = (
    MODEL,
    ("served items/s", "perf_analyzer's throughput at the highest concurrency measured"),
    ("at", "that concurrency (one item a request)"),
    (
        "in-process items/s",
        "the same pipeline in one process (the served python models' own code, the same "
        "TorchScript on the same device), *batch* one-item requests a call",
    ),
    ("batch", "the largest batch the model's config allows"),
    ("served / in-process", "served items/s ÷ in-process items/s"),
    ("goal", "issue 30's bound on that ratio, where it sets one, and whether it was met"),
    ("served p50 c1 ms", "perf_analyzer's median latency with one request in flight"),
    ("in-process p50 batch 1 ms", "the median of one-request calls in process"),
    ("added at c1 ms", "served p50 c1 less in-process p50 batch 1"),
    (
        "busiest step",
        "at the highest concurrency, the step whose instances were busiest (*busy* in the "
        "statistics table): near 100 %, the step that caps the pipeline",
    ),
)
SERVED: Columns = (
    MODEL,
    ("concurrency", "requests in flight (perf_analyzer's --concurrency-range), one item each"),
    ("items/s", "perf_analyzer's throughput over its last, stable windows"),
    ("p50 ms", "client-side latency, median"),
    ("p95 ms", "client-side latency, 95th percentile"),
    ("p99 ms", "client-side latency, 99th percentile"),
    (
        "measured for s",
        "wall time of the measured perf_analyzer call (all its windows): the span Triton's "
        "statistics cover",
    ),
)
STEPS: Columns = (
    MODEL,
    ("concurrency", "as in the served table"),
    (
        "step",
        "a model the requests went through: the ensemble, its composing models, a model "
        "called by BLS (`bert_model` behind `bert`)",
    ),
    ("instances", "the config's instance count (— for an ensemble: it executes nothing itself)"),
    ("requests", "requests the step completed in the span"),
    ("requests / execution", "requests per execute call: the batch its dynamic batcher formed"),
    ("rows / execution", "items per execute call (a BLS call carries many rows in one request)"),
    ("queue ms", "Triton's average queue time per request"),
    ("compute input ms", "Triton's average per request: inputs gathered for the execution"),
    (
        "compute infer ms",
        "Triton's average per request: the execution itself, which every request of a batch "
        "is charged in full (for an ensemble: its steps' sum)",
    ),
    ("compute output ms", "Triton's average per request: outputs handed back"),
    (
        "busy",
        "compute per request × executions ÷ (instances × the span): the share of the "
        "instances' time spent executing (a little over 100 % where the requests of one "
        "execution finish at different times: `nmt` answers each as its rows finish)",
    ),
)
IN_PROCESS: Columns = (
    MODEL,
    ("batch", "one-item requests per call"),
    ("items/s", "batch × calls ÷ their total time"),
    ("p50 ms", "a call's latency (the whole batch), median"),
    ("p95 ms", "a call's latency, 95th percentile"),
    ("p99 ms", "a call's latency, 99th percentile"),
    ("calls", "timed calls, after two untimed ones"),
    (
        "phases, ms per call",
        "each stage's mean time per call, in order; a phase marked *inside* is part of the "
        "stage before it (the engine behind `bert`'s BLS call, the search's steps)",
    ),
)
SDK: Columns = (
    MODEL,
    (
        "method",
        "the SDK call: one item a call, one at a time; or the batch method (`classify_batch`, "
        "`embed` of a list) on N items, one request each, sent concurrently by its threads",
    ),
    ("calls", "timed calls, after one untimed"),
    ("items/s", "items ÷ call time"),
    ("p50 ms", "a call's latency, median"),
    ("p95 ms", "a call's latency, 95th percentile"),
    ("p99 ms", "a call's latency, 99th percentile"),
)
BUILDS: Columns = (
    ("family", "the build_engines family"),
    ("command", "what built the served repository (its log, build-<family>.log, beside this)"),
    ("s", "the build's wall time"),
)


def table(columns: Columns, rows: Sequence[Sequence[object]], notes: Sequence[str] = ()) -> list:
    """A markdown table, then one line defining each column, then ``notes``."""
    names = [name for name, _ in columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    lines += ["", *(f"- *{name}*: {text}." for name, text in columns), *notes, ""]
    return lines


def markdown(data: dict, command: str) -> str:
    env = {
        **data.get("env", {}),
        **({"elapsed_s": data["elapsed_s"]} if "elapsed_s" in data else {}),
    }
    settings = data.get("settings", {})
    load = (
        f"perf_analyzer (C++, gRPC), one item a request, {settings.get('seconds', '?')} s "
        f"windows until throughput and p99 agree within {settings.get('stability', '?')} %, "
        "after an untimed warm-up at each concurrency; in process: one thread"
    )
    models = [m for m in MODELS if any(k.endswith(f" {m}") for k in data)]
    sections = [
        [header(TITLE, command, load, env)],
        ["## Summary", "", *table(SUMMARY, [_summary_row(data, m) for m in models])],
        ["## Served through perf_analyzer", "", *table(SERVED, _served_rows(data, models))],
        ["## Triton's statistics per step", "", *table(STEPS, _step_rows(data, models))],
        _in_process(data, models),
        _sdk(data, models),
        _builds(data),
        _problems(data),
    ]
    return "\n".join(line for section in sections for line in section) + "\n"


def _num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _measured(data: dict, model: str) -> list[tuple[int, dict]]:
    """(concurrency, row) of every served row with a result, lowest concurrency first."""
    rows = data.get(f"served {model}") or {}
    return sorted(
        (int(key.removeprefix("c")), row) for key, row in rows.items() if "items_per_s" in row
    )


def _busiest(row: dict) -> str:
    steps = [(s["busy"], name) for name, s in row.get("steps", {}).items() if s.get("busy")]
    if not steps:
        return "—"
    busy, name = max(steps)
    return f"`{name}` ({busy:.0%})"


def _summary_row(data: dict, model: str) -> list[str]:
    measured = _measured(data, model)
    local = data.get(f"in-process {model}") or {}
    largest, bs1 = local.get(f"bs{local.get('max_batch')}"), local.get("bs1")
    top_c, top = measured[-1] if measured else (None, None)
    c1 = dict(measured).get(1)
    ratio = top["items_per_s"] / largest["items_per_s"] if top and largest else None
    goal = GOALS.get(model)
    met = "—" if goal is None or ratio is None else ("met" if ratio >= goal else "not met")
    return [
        f"`{model}`",
        _num(top and top["items_per_s"]),
        f"c{top_c}" if top_c else "—",
        _num(largest and largest["items_per_s"]),
        largest["batch"] if largest else "—",
        f"{_num(ratio, 2)}×",
        f"≥ {goal}× ({met})" if goal else "—",
        _num(c1 and c1["p50"], 2),
        _num(bs1 and bs1["p50"], 2),
        _num(c1["p50"] - bs1["p50"] if c1 and bs1 else None, 2),
        _busiest(top or {}),
    ]


def _last_line(text: str) -> str:
    """The gist of perf_analyzer's complaint, fit for a table cell."""
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else text)[-160:].replace("|", "/")


def _served_rows(data: dict, models: list[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    for model in models:
        for key, row in (data.get(f"served {model}") or {}).items():
            if "items_per_s" not in row:
                why = row.get("skipped") or _last_line(row.get("error", "failed"))
                rows.append([f"`{model}`", key, why, "", "", "", ""])
                continue
            retried = " (retried: 2× windows, looser bound)" if row.get("retried") else ""
            rows.append(
                [
                    f"`{model}`",
                    f"{row['concurrency']}{retried}",
                    _num(row["items_per_s"], 1),
                    f"{row['p50']:.2f}",
                    f"{row['p95']:.2f}",
                    f"{row['p99']:.2f}",
                    row["wall_s"],
                ]
            )
    return rows


def _step_rows(data: dict, models: list[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    for model in models:
        for concurrency, row in _measured(data, model):
            for name, s in row.get("steps", {}).items():
                rows.append(
                    [
                        f"`{model}`",
                        concurrency,
                        f"`{name}`",
                        s["instances"] or "—",
                        s["requests"],
                        s["requests_per_execution"],
                        s["rows_per_execution"],
                        *(f"{s[k]:.2f}" for k in ("queue_ms", "compute_input_ms")),
                        *(f"{s[k]:.2f}" for k in ("compute_infer_ms", "compute_output_ms")),
                        "—" if s.get("busy") is None else f"{s['busy']:.0%}",
                    ]
                )
    return rows


def _in_process(data: dict, models: list[str]) -> list[str]:
    rows: list[list[object]] = []
    notes = []
    for model in models:
        local = data.get(f"in-process {model}") or {}
        for key, row in local.items():
            if key.startswith("bs"):
                phases = "; ".join(f"{k.strip()} {v:.2f}" for k, v in row["phases_ms"].items())
                rows.append(
                    [
                        f"`{model}`",
                        row["batch"],
                        _num(row["items_per_s"], 1),
                        *(f"{row[q]:.2f}" for q in ("p50", "p95", "p99")),
                        row["calls"],
                        phases,
                    ]
                )
        if local.get("notes"):
            notes.append(
                f"- `{model}` ran "
                + ", ".join(f"{k}: {v}" for k, v in local["notes"].items())
                + "."
            )
    return ["## In process", "", *table(IN_PROCESS, rows, notes)]


def _sdk(data: dict, models: list[str]) -> list[str]:
    rows: list[list[object]] = []
    for model in models:
        result = data.get(f"sdk {model}") or {}
        for mode, row in result.items():
            if isinstance(row, dict):
                how = "one at a time" if mode == "sequential" else f"{mode[5:]} items"
                rows.append(
                    [
                        f"`{model}`",
                        f"`{result['method']}` ({how})",
                        row["calls"],
                        _num(row["items_per_s"], 1),
                        *(f"{row[q]:.2f}" for q in ("p50", "p95", "p99")),
                    ]
                )
    return (
        ["## The SDK (`triton_kit.client.TritonClient`, gRPC)", "", *table(SDK, rows)]
        if rows
        else []
    )


def _builds(data: dict) -> list[str]:
    rows = [
        [key.removeprefix("build "), f"`{value['command']}`", value["seconds"]]
        for key, value in data.items()
        if key.startswith("build ") and value
    ]
    return ["## Builds", "", *table(BUILDS, rows)] if rows else []


def _problems(data: dict) -> list[str]:
    lines = [f"- skipped `{name}`: {why}" for name, why in (data.get("skipped") or {}).items()]
    for name, text in (data.get("errors") or {}).items():
        lines += ["", f"Step `{name}` failed:", "", "```", text[-2000:].rstrip(), "```"]
    return ["## Skipped and failed", "", *lines, ""] if lines else []
