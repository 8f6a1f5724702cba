"""``index.html``: one page with the summary, the SLO capacity, run metadata, the plots and
Locust's own pages, so a run is read in a browser from a single file.

Plain HTML with relative links (the folder can be copied or served as is); a small script
marks, once the page has loaded, how many plots actually decoded, which the headless
Chromium test reads back.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from triton_kit.loadtest.metadata import RunMetadata
from triton_kit.loadtest.reports.files import MIN_P99_SAMPLES, ordered, stable_cell
from triton_kit.loadtest.reports.slo import Capacity
from triton_kit.loadtest.reports.summary import StepResult

PLOTS = (
    ("curve.png", "Latency against throughput, per model and protocol"),
    ("latency.png", "Latency percentiles against users"),
    ("throughput.png", "Throughput against users"),
)
HEADERS = ("protocol", "model", "users", "requests", "err %", "req/s", "p50 ms", "p90 ms",
           "p95 ms", "p99 ms", "queue ms", "compute ms", "Locust CPU %", "stable")  # fmt: skip

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; max-width: 1400px; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #eee; } td.text { text-align: left; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
iframe { width: 100%; height: 600px; border: 1px solid #ccc; }
.flag { color: #b00; }
"""

_SCRIPT = """
window.addEventListener("load", () => {
  const images = Array.from(document.querySelectorAll("img.plot"));
  const ok = images.filter((img) => img.complete && img.naturalWidth > 0).length;
  const marker = document.createElement("p");
  marker.id = "plots-loaded";
  marker.textContent = ok + " of " + images.length + " plots loaded";
  document.body.appendChild(marker);
});
"""


def _cells(r: StepResult) -> list[str]:
    queue, compute = r.server_split_ms
    p99 = f"{r.p99_ms:.2f}"
    if r.requests < MIN_P99_SAMPLES:
        p99 += ' <span class="flag" title="fewer than enough samples">†</span>'
    return [
        escape(r.protocol), escape(r.model), str(r.users), str(r.requests),
        f"{100 * r.error_ratio:.2f}", f"{r.throughput_rps:.1f}", f"{r.p50_ms:.2f}",
        f"{r.p90_ms:.2f}", f"{r.p95_ms:.2f}", p99, f"{queue:.2f}", f"{compute:.2f}",
        f"{100 * r.client_cpu_ratio:.0f}", stable_cell(r),
    ]  # fmt: skip


def _table(results: Sequence[StepResult]) -> str:
    head = "".join(f"<th>{h}</th>" for h in HEADERS)
    rows = []
    for r in ordered(results):
        cells = _cells(r)
        rows.append(
            "<tr>"
            + "".join(
                f'<td class="text">{c}</td>' if i < 2 else f"<td>{c}</td>"
                for i, c in enumerate(cells)
            )
            + "</tr>"
        )
    return f'<table id="summary-table"><tr>{head}</tr>{"".join(rows)}</table>'


def _capacity(found: Sequence[Capacity]) -> str:
    if not found:
        return '<p id="capacity">No p99 SLO given (--slo-p99-ms): no capacity to report.</p>'
    items = "".join(f"<li>{escape(c.sentence())}</li>" for c in found)
    return f'<ul id="capacity">{items}</ul>'


def _metadata(meta: RunMetadata | None) -> str:
    if meta is None:
        return '<p id="metadata">No run metadata.</p>'
    facts = [("commit", meta.commit), ("started (UTC)", meta.started_utc),
             ("command", meta.command)]  # fmt: skip
    facts += [(f"machine: {k}", v) for k, v in meta.machine.items()]
    facts += [(f"version: {k}", v) for k, v in meta.versions.items()]
    rows = "".join(f'<tr><th>{escape(k)}</th><td class="text">{escape(v)}</td></tr>'
                   for k, v in facts)  # fmt: skip
    models = "".join(
        f'<tr><td class="text">{escape(m.name)}</td><td class="text">{escape(m.platform)}</td>'
        f'<td>{m.max_batch_size}</td><td class="text">{escape(m.instances or "-")}</td>'
        f"<td>{'none' if m.max_queue_delay_us is None else m.max_queue_delay_us}</td>"
        f"<td>{escape(','.join(map(str, m.preferred_batch_sizes)) or '-')}</td></tr>"
        for m in meta.models
    )
    return (
        f'<table id="metadata">{rows}</table>'
        '<h3>Model configurations (read from Triton)</h3><table id="model-configs">'
        "<tr><th>Triton model</th><th>platform</th><th>max batch</th><th>instances</th>"
        f"<th>queue delay µs</th><th>preferred batch</th></tr>{models}</table>"
    )


def _locust_pages(out: Path, protocols: Sequence[str]) -> str:
    parts = []
    for protocol in protocols:
        page = Path(protocol) / "locust.html"
        if not (out / page).exists():
            continue
        parts.append(
            f'<h3>{escape(protocol)}</h3><p><a id="locust-{escape(protocol)}" '
            f'href="{escape(str(page))}">Locust report ({escape(protocol)})</a>, and its '
            f'<a href="{escape(protocol)}/locust_stats.csv">statistics CSV</a>.</p>'
            f'<iframe title="Locust {escape(protocol)}" src="{escape(str(page))}"></iframe>'
        )
    return "".join(parts) or "<p>No Locust report was written.</p>"


def write_index(
    results: Sequence[StepResult],
    out: Path,
    found: Sequence[Capacity] = (),
    meta: RunMetadata | None = None,
) -> Path:
    protocols = sorted({r.protocol for r in results})
    plots = "".join(
        f'<figure><img class="plot" id="plot-{name.removesuffix(".png")}" src="{name}" '
        f'alt="{escape(caption)}"><figcaption>{escape(caption)}</figcaption></figure>'
        for name, caption in PLOTS
        if (out / name).exists()
    )
    body = (
        "<h1>Load test report</h1>"
        '<section id="summary"><h2>Summary per protocol, model and step</h2>'
        f"{_table(results)}"
        f"<p>† fewer than {MIN_P99_SAMPLES} requests in the window: that p99 is close to the "
        "maximum, not an estimate. Summary, plots and SLO cover each step's window after its "
        "settle time; Locust's own pages below cover the whole run, settle periods included, "
        'so their percentiles differ. Full text: <a href="summary.md">summary.md</a>, '
        '<a href="summary.csv">summary.csv</a>, <a href="summary.json">summary.json</a>.</p>'
        "</section>"
        f"<section><h2>Highest load within the p99 SLO</h2>{_capacity(found)}</section>"
        f'<section id="plots"><h2>Plots</h2>{plots}</section>'
        f"<section><h2>Run</h2>{_metadata(meta)}</section>"
        f'<section id="locust"><h2>Locust\'s own reports</h2>{_locust_pages(out, protocols)}'
        "</section>"
    )
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Load test report</title><style>{_STYLE}</style></head>"
        f"<body>{body}<script>{_SCRIPT}</script></body></html>\n"
    )
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
