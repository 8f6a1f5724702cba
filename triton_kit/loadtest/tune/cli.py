"""``python -m triton_kit.loadtest tune``: check everything, profile each model, report, apply."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.loadtest.tune import apply, config, environment, inputs, report, run, space, summary
from triton_kit.loadtest.tune.errors import TuneError
from triton_kit.loadtest.tune.options import PROJECT_ROOT, TuneOptions, parse


@dataclass(frozen=True)
class Plan:
    """One model, checked before anything starts."""

    model_config: mc.ModelConfig
    space: space.SearchSpace


def prepare(options: TuneOptions) -> list[Plan]:
    """Every model's search space and input data, or a TuneError before anything runs."""
    cores, gpu = os.cpu_count() or 1, environment.gpu_present()
    plans = []
    for model in options.models:
        model_config = space.load_config(options.model_repository, model)
        search = space.derive(model_config, options, cores, gpu)
        # raises where perf_analyzer could not feed it
        inputs.input_data(model_config, shapes=options.shapes)
        plans.append(Plan(model_config, search))
    return plans


@dataclass(frozen=True)
class Tools:
    analyzer: Path
    perf_analyzer: Path
    server: environment.EmbeddedServer


def profile(plan: Plan, options: TuneOptions, out: Path, tools: Tools) -> Path:
    """Run Model Analyzer for one model; returns its CSV."""
    model = plan.space.model
    model_run = config.ModelRun(out / model)
    measurement = config.Measurement(
        options.measurement_ms,
        options.stability_percent,
        inputs.write(plan.model_config, model_run.folder / "input-data.json", options.shapes),
    )
    body = config.profile_config(
        options.model_repository,
        tools.server,
        plan.space,
        model_run,
        tools.perf_analyzer,
        measurement,
        options.slo_p99_ms,
        options.min_throughput,
    )
    config.write(body, model_run)
    total = (plan.space.variant_count + 1) * len(plan.space.concurrency)
    print(f"[tune] {model}: up to {total} measurements; log {model_run.log}", flush=True)
    seconds = run.profile(tools.analyzer, model_run, model, total)
    print(f"[tune] {model}: profiled in {seconds:.0f} s", flush=True)
    return model_run.csv


def model_report(
    plan: Plan, options: TuneOptions, out: Path
) -> tuple[report.ModelReport, apply.Change | None]:
    """The model's report, and with --apply the change it plans (written only after every
    report exists)."""
    model = plan.space.model
    model_run = config.ModelRun(out / model)
    results = summary.summarise(
        model_run.csv.read_text(), options.slo_p99_ms, options.min_throughput
    )
    if model not in results:
        raise TuneError(f"Model Analyzer's CSV has no rows for {model} ({model_run.csv})")
    result = results[model]
    fields = {
        r.config: report.describe(model_run.variants / r.config / "config.pbtxt", plan.space.paths)
        for r in result.configs
    }
    ma_reports = model_run.export / "reports"
    links = {
        "CSV": model_run.csv,
        "summary": ma_reports / "summaries" / model / "result_summary.html",
    }
    links |= {
        f"details {r.config}": ma_reports / "detailed" / r.config / "detailed_report.html"
        for r in result.configs
    }
    shown = {k: str(v.relative_to(out)) for k, v in links.items() if v.exists()}
    change, applied = plan_apply(result, plan, options, out) if options.apply else (None, "")
    return report.ModelReport(result, fields, shown, applied), change


def plan_apply(
    result: summary.ModelSummary, plan: Plan, options: TuneOptions, out: Path
) -> tuple[apply.Change | None, str]:
    """Diff the chosen fields without writing them; returns the change and the report's line.
    An invalid chosen config stops the run before anything is written."""
    chosen = result.chosen
    if chosen is None:
        return None, "--apply: nothing applied (no config within the limits)"
    model_dir = options.model_repository / result.model
    variant = config.ModelRun(out / result.model).variants / chosen.config / "config.pbtxt"
    source = str(out.relative_to(PROJECT_ROOT)) if out.is_relative_to(PROJECT_ROOT) else out.name
    try:
        change = apply.plan(model_dir, variant, plan.space.paths, f"loadtest tune: {source}")
    except (OSError, text_format.ParseError) as exc:
        raise TuneError(f"--apply: {result.model}'s chosen config {variant}: {exc}") from exc
    if not change.diff:
        return None, "--apply: the chosen config is the one served; nothing to change"
    print(change.diff, end="", flush=True)
    return change, (
        f"--apply: wrote {', '.join(plan.space.paths)} of {chosen.config} into "
        f"{model_dir / 'config.pbtxt'} (recorded in tuned.json; a rebuild keeps them)"
    )


def header(options: TuneOptions, argv: list[str]) -> dict[str, str]:
    # A copy without .git (the lent GPU machine, scripts/gpu/bench.sh) has TRITON_KIT_COMMIT.
    commit = (
        os.environ.get("TRITON_KIT_COMMIT")
        or subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    limits = f"p99 <= {options.slo_p99_ms:g} ms"
    if options.min_throughput:
        limits += f", >= {options.min_throughput:g} infer/s"
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()}, {os.cpu_count()} cores, {platform.machine()}",
        "command": shlex.join(["python", "-m", "triton_kit.loadtest", "tune", *argv]),
        "commit": commit or "?",
        "limits": limits,
        "measurement": f"perf_analyzer windows of {options.measurement_ms} ms, "
        f"stable within {options.stability_percent}%",
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options = parse(argv)
    try:
        plans = prepare(options)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        out = (options.out or PROJECT_ROOT / "reports" / "tune" / stamp).resolve()
        server = environment.embedded_server(
            options.model_repository, options.models, out / "backends"
        )
        tools = Tools(
            environment.model_analyzer(options.venv, options.model_analyzer),
            environment.perf_analyzer(options.perf_analyzer),
            server,
        )
        for plan in plans:
            profile(plan, options, out, tools)
        planned = [model_report(plan, options, out) for plan in plans]
    except TuneError as exc:
        print(f"tune: {exc}", file=sys.stderr)
        return 2
    reports = [rep for rep, _ in planned]
    page = report.write(out, reports, header(options, argv))
    try:
        apply.write_all([change for _, change in planned if change is not None])
    except TuneError as exc:
        failed = [replace(rep, applied=str(exc)) if rep.applied else rep for rep in reports]
        report.write(out, failed, header(options, argv))
        print(f"tune: {exc}; report: {page}", file=sys.stderr)
        return 2
    for rep in reports:
        chosen = rep.summary.chosen
        line = rep.summary.failure() or f"{rep.summary.model}: chose {chosen and chosen.config}"
        print(f"[tune] {line}")
    print(f"[tune] report: {page}")
    return 1 if any(rep.summary.chosen is None for rep in reports) else 0
