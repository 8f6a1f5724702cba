"""The kit's one-page report of a tuning run: summary.md, index.html, a plot per model.

Model Analyzer's own summary and detailed reports stay in each model's folder; this page
says at a glance what was chosen, against what, and why every other config lost.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.loadtest.tune.summary import ConfigResult, Measurement, ModelSummary


@dataclass(frozen=True)
class ModelReport:
    """One model's summary with each config's fields in words and links to MA's reports."""

    summary: ModelSummary
    fields: Mapping[str, str]
    links: Mapping[str, str] = field(default_factory=dict)
    applied: str = ""


def twin_note(report: ModelReport) -> str:
    """A variant equal to the config as built measures the noise, not a better config."""
    s = report.summary
    chosen, default = s.chosen, s.default
    if chosen is None or default is None or chosen is default:
        return ""
    if report.fields.get(chosen.config) != report.fields.get(default.config):
        return ""
    return (
        f"{chosen.config} has the same fields as the config as built: the gap between them "
        "is measurement noise on this machine, and --apply changes nothing."
    )


def describe(config_path: Path, paths: tuple[str, ...]) -> str:
    """The tuned fields of a variant's config.pbtxt, in words."""
    if not config_path.is_file():
        return "?"
    config = text_format.Parse(config_path.read_text(), mc.ModelConfig())
    groups = ", ".join(
        f"{g.count} x {mc.ModelInstanceGroup.Kind.Name(g.kind)[5:]}" for g in config.instance_group
    )
    parts = [f"instances {groups or '1'}"]
    if "max_batch_size" in paths or config.max_batch_size:
        parts.append(f"max batch {config.max_batch_size}")
    if config.HasField("dynamic_batching"):
        batching = config.dynamic_batching
        parts.append(f"queue delay {batching.max_queue_delay_microseconds} µs")
        if batching.preferred_batch_size:
            parts.append(f"preferred {list(batching.preferred_batch_size)}")
    return ", ".join(parts)


def _figures(m: Measurement | None) -> str:
    if m is None:
        return "—"
    avg = f", avg {m.avg_ms:g}" if m.avg_ms is not None else ""
    p90 = f", p90 {m.p90_ms:g}" if m.p90_ms is not None else ""
    return f"{m.throughput:g} infer/s, p99 {m.p99_ms:g} ms{p90}{avg} (concurrency {m.concurrency})"


def _label(result: ConfigResult) -> str:
    return f"{result.config} (as built)" if result.is_default else result.config


def markdown(reports: list[ModelReport], header: Mapping[str, str]) -> str:
    lines = ["# Tuning report", ""]
    lines += [f"- {key}: {value}" for key, value in header.items()]
    for report in reports:
        s = report.summary
        lines += ["", f"## {s.model}", ""]
        if s.chosen is None:
            lines += [f"**No config chosen.** {s.failure()}", ""]
        else:
            lines += [
                f"**Chosen: {_label(s.chosen)}** — {report.fields.get(s.chosen.config, '?')}: "
                f"{_figures(s.chosen.best)}",
                "",
            ]
        lines += [f"{note}\n" for note in (twin_note(report), report.applied) if note]
        lines += [
            "| config | fields | best within the limits | verdict |",
            "| --- | --- | --- | --- |",
        ]
        for r in s.configs:
            lines.append(
                f"| {_label(r)} | {report.fields.get(r.config, '?')} | {_figures(r.best)} "
                f"| {r.verdict} |"
            )
        lines += ["", f"![throughput against p99]({s.model}.png)"]
        lines += [f"- skipped: {note}" for note in s.skipped_rows]
        lines += [f"- Model Analyzer's {name}: {link}" for name, link in report.links.items()]
    return "\n".join(lines) + "\n"


def page(reports: list[ModelReport], header: Mapping[str, str]) -> str:
    """index.html: the same content as summary.md, for a browser."""
    esc = html.escape
    body = ["<h1>Tuning report</h1><ul>"]
    body += [f"<li>{esc(k)}: {esc(v)}</li>" for k, v in header.items()]
    body.append("</ul>")
    for report in reports:
        s = report.summary
        body.append(f"<h2>{esc(s.model)}</h2>")
        if s.chosen is None:
            body.append(f"<p class='bad'><b>No config chosen.</b> {esc(s.failure() or '')}</p>")
        else:
            chosen = f"{_label(s.chosen)} — {report.fields.get(s.chosen.config, '?')}"
            body.append(f"<p><b>Chosen: {esc(chosen)}</b>: {esc(_figures(s.chosen.best))}</p>")
        body += [f"<p>{esc(n)}</p>" for n in (twin_note(report), report.applied) if n]
        body.append(
            "<table><tr><th>config</th><th>fields</th><th>best within the limits</th>"
            "<th>verdict</th></tr>"
        )
        for r in s.configs:
            cells = (_label(r), report.fields.get(r.config, "?"), _figures(r.best), r.verdict)
            body.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
        body.append(f"</table><img src='{esc(s.model)}.png' alt='throughput against p99'>")
        links = [f"<a href='{esc(link)}'>{esc(name)}</a>" for name, link in report.links.items()]
        if links:
            body.append(f"<p>Model Analyzer's reports: {' · '.join(links)}</p>")
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}"
        ".bad{color:#a00}img{max-width:100%}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Tuning report</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )


def plot(summary: ModelSummary, path: Path) -> Path:
    """Throughput against p99, one line per config across its concurrencies; the SLO dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for result in summary.configs:
        points = sorted(result.measurements, key=lambda m: m.concurrency)
        style = "o-" if result is summary.chosen else "x--" if result.is_default else ".:"
        ax.plot(
            [m.p99_ms for m in points], [m.throughput for m in points], style, label=_label(result)
        )
        for m in points:
            ax.annotate(f"c{m.concurrency}", (m.p99_ms, m.throughput), fontsize=7)
    ax.axvline(summary.slo_p99_ms, color="red", linestyle="--", label="SLO p99")
    ax.set_xlabel("p99 latency (ms)")
    ax.set_ylabel("throughput (infer/s)")
    ax.set_title(f"{summary.model}: each config across client concurrency")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def as_json(reports: list[ModelReport], header: Mapping[str, str]) -> str:
    def config(r: ConfigResult) -> dict:
        best = r.best.__dict__ if r.best is not None else None
        return {"config": r.config, "as_built": r.is_default, "best": best, "verdict": r.verdict}

    models = {
        rep.summary.model: {
            "chosen": rep.summary.chosen.config if rep.summary.chosen else None,
            "runner_up": rep.summary.runner_up.config if rep.summary.runner_up else None,
            "failure": rep.summary.failure(),
            "fields": dict(rep.fields),
            "configs": [config(r) for r in rep.summary.configs],
        }
        for rep in reports
    }
    return json.dumps({"run": dict(header), "models": models}, indent=2) + "\n"


def write(out: Path, reports: list[ModelReport], header: Mapping[str, str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for report in reports:
        if report.summary.configs:
            plot(report.summary, out / f"{report.summary.model}.png")
    (out / "summary.md").write_text(markdown(reports, header))
    (out / "summary.json").write_text(as_json(reports, header))
    (out / "index.html").write_text(page(reports, header))
    return out / "index.html"
