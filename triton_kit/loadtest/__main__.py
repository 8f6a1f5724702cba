"""``python -m triton_kit.loadtest run``: a headless stepped load test with reports, plots and
SLOs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from triton_kit.loadtest.options import DEFAULT_STEPS, USER_CLASS_NAMES, parse_steps
from triton_kit.loadtest.reports import stability
from triton_kit.loadtest.reports.slo import Slo
from triton_kit.loadtest.reports.stability import StabilityRule
from triton_kit.loadtest.runner import PROJECT_ROOT, RunConfig, run


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m triton_kit.loadtest", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser(
        "run",
        help="stepped load against Triton; writes reports/loadtest/<timestamp>/",
        description="Start the embedded Triton (unless --host), run a stepped Locust load per "
        "protocol, and write Locust's CSV/HTML, summary.{md,csv,json} (per model and step: "
        "p50/p90/p95/p99, throughput, error ratio, Triton queue vs compute, stability; the "
        "highest load within --slo-p99-ms), metadata.json, curve.png / latency.png / "
        "throughput.png and index.html. Exit codes: 0 ok, 1 SLO breach, 2 run failed.",
    )
    add_run_arguments(run_parser)
    commands.add_parser(
        "tune",
        add_help=False,
        help="best Triton config per model under a p99 SLO (Triton Model Analyzer); "
        "python -m triton_kit.loadtest tune --help",
    )
    commands.add_parser(
        "options",
        help="the kit's Locust options (locust --help cannot list them: Locust answers "
        "--help before it imports the locustfile)",
    )
    return parser


def print_locust_options() -> int:
    from triton_kit.loadtest.options import add_arguments

    parser = argparse.ArgumentParser(
        prog="locust -f triton_kit/loadtest/locustfile.py",
        description="The Triton kit's Locust options, besides Locust's own (locust --help). "
        "All but --model-name and --raw-out also appear in the web UI's custom parameters.",
        add_help=False,
    )
    add_arguments(parser)
    parser.print_help()
    return 0


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="URL",
        help="A running server, grpc://HOST:PORT or http://HOST:PORT (repeat for both "
        "protocols). Default: start the embedded Triton and test --protocols.",
    )
    p.add_argument(
        "--protocols",
        type=_csv,
        default=["grpc", "http"],
        help="Embedded server only: protocols to test, in order (default grpc,http).",
    )
    p.add_argument(
        "--models",
        type=_csv,
        default=list(USER_CLASS_NAMES),
        help="Model families to load-test (default resnet50,bert,nmt); any not loaded is "
        "skipped with a message.",
    )
    p.add_argument(
        "--steps",
        default=DEFAULT_STEPS,
        help=f"Concurrent users per model (times its --weights) at each step "
        f"(default {DEFAULT_STEPS}).",
    )
    p.add_argument("--step-time", type=float, default=12.0, help="Seconds per step (default 12).")
    p.add_argument(
        "--settle-time",
        type=float,
        default=4.0,
        help="Seconds at the start of each step left out of the numbers (default 4).",
    )
    p.add_argument(
        "--weights",
        default="",
        help="User/task weights, e.g. 'resnet50=2,nmt.beam=0' (see locust --help).",
    )
    p.add_argument(
        "--model-name",
        action="append",
        default=[],
        metavar="FAMILY=MODEL",
        help="Load-test another Triton model with a family's contract (repeatable).",
    )
    p.add_argument(
        "--stability-window",
        type=float,
        default=stability.DEFAULT_WINDOW_S,
        help="Seconds per stability window (default 0: off, each step runs --step-time). When "
        "on, a step ends once throughput and p99 of every model agree within "
        "--stability-tolerance over --stability-windows consecutive windows (perf_analyzer's "
        "rule), or at --step-time; the summary says whether each step was stable.",
    )
    p.add_argument(
        "--stability-tolerance",
        type=float,
        default=stability.DEFAULT_TOLERANCE,
        help=f"Largest deviation from the windows' mean, a fraction "
        f"(default {stability.DEFAULT_TOLERANCE:g}).",
    )
    p.add_argument(
        "--stability-windows",
        type=int,
        default=stability.DEFAULT_WINDOWS,
        help=f"Consecutive windows that must agree (default {stability.DEFAULT_WINDOWS}).",
    )
    p.add_argument(
        "--min-samples",
        type=int,
        default=stability.DEFAULT_MIN_SAMPLES,
        help="Successful requests each window needs per model "
        f"(default {stability.DEFAULT_MIN_SAMPLES}).",
    )
    p.add_argument("--slo-p99-ms", type=float, help="Fail (exit 1) if any step's p99 exceeds it.")
    p.add_argument(
        "--slo-error-ratio",
        type=float,
        help="Fail (exit 1) if any step's error ratio exceeds it (e.g. 0.01).",
    )
    p.add_argument("--out", type=Path, help="Output folder (default reports/loadtest/<UTC time>).")
    p.add_argument(
        "--model-repository",
        type=Path,
        default=PROJECT_ROOT / "model_repository",
        help="Repository the embedded server serves (default model_repository/).",
    )
    p.add_argument(
        "--locust-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="Extra argument passed to Locust as is (repeatable), e.g. --locust-arg=--beam-size=2.",
    )


def config_from(args: argparse.Namespace) -> RunConfig:
    parse_steps(args.steps)  # fail fast on a bad value
    unknown = sorted(set(args.models) - set(USER_CLASS_NAMES))
    if unknown:
        raise SystemExit(f"--models: unknown {unknown}; known: {sorted(USER_CLASS_NAMES)}")
    if not args.protocols or set(args.protocols) - {"grpc", "http"}:
        raise SystemExit(f"--protocols: give grpc, http or both, not {args.protocols}")
    return RunConfig(
        models=args.models,
        protocols=args.protocols,
        hosts=args.host,
        steps=args.steps,
        step_time=args.step_time,
        settle_time=args.settle_time,
        weights=args.weights,
        model_names=args.model_name,
        slo=Slo(p99_ms=args.slo_p99_ms, error_ratio=args.slo_error_ratio),
        out=args.out,
        model_repository=args.model_repository,
        locust_args=args.locust_arg,
        stability=StabilityRule(
            window_s=args.stability_window,
            tolerance=args.stability_tolerance,
            windows=args.stability_windows,
            min_samples=args.min_samples,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["tune"]:  # its own parser: triton_kit/loadtest/tune/options.py
        from triton_kit.loadtest.tune.cli import main as tune

        return tune(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "options":
        return print_locust_options()
    return run(config_from(args))


if __name__ == "__main__":
    sys.exit(main())
