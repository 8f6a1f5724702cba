"""Command line: ``python -m triton_kit.server serve`` runs Triton in the foreground."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from triton_kit.server.errors import ServerError
from triton_kit.server.launcher import ServerConfig, run_foreground
from triton_kit.server.security import API_KEY_ENV, API_KEY_HEADER, RESTRICTED_APIS

_DEFAULTS = ServerConfig()


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.server",
        description="Run a real Triton Inference Server on a model repository. The binary is "
        "$TRITONSERVER, else `tritonserver` on PATH (the official container), else the one "
        "bundled in the nvidia-pytriton wheel (CPU machines, no Docker).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="serve in the foreground until Ctrl-C or SIGTERM",
        description="Serve a model repository in the foreground; prints the addresses and the "
        "loaded models once ready. Ctrl-C/SIGTERM drain it first: the entry models (ensembles, "
        "and python models no ensemble uses as a step, e.g. BLS) are unloaded, so new requests "
        "to them are refused while in-flight ones, their steps included, get up to "
        "--exit-timeout seconds; then Triton stops, giving what remains the same time again. "
        f"The {', '.join(RESTRICTED_APIS)} endpoints answer only "
        f"requests with header '{API_KEY_HEADER}: <${API_KEY_ENV}>' (a random key when unset).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    serve.add_argument(
        "--model-repository",
        type=Path,
        default=_DEFAULTS.model_repository,
        help="folder of models to serve",
    )
    serve.add_argument(
        "--host",
        default=os.environ.get("HOST", _DEFAULTS.host),
        help="address for HTTP, gRPC and metrics ($HOST; 0.0.0.0 exposes it to the network)",
    )
    for name, default, what in (
        ("http", _DEFAULTS.http_port, "HTTP/REST"),
        ("grpc", _DEFAULTS.grpc_port, "gRPC"),
        ("metrics", _DEFAULTS.metrics_port, "Prometheus metrics"),
    ):
        env = f"{name.upper()}_PORT"
        serve.add_argument(
            f"--{name}-port",
            type=int,
            default=_env_int(env, default),
            help=f"{what} port (${env} when set; 0 picks a free one)",
        )
    serve.add_argument(
        "--log-file",
        type=Path,
        default=None,
        help="server log (None: logs/tritonserver-<port>.log)",
    )
    serve.add_argument(
        "--log-verbose", type=int, default=_DEFAULTS.log_verbose, help="Triton's --log-verbose"
    )
    serve.add_argument(
        "--startup-timeout", type=float, default=300.0, help="seconds to wait for ready"
    )
    serve.add_argument(
        "--exit-timeout",
        type=int,
        default=_DEFAULTS.exit_timeout_s,
        help="seconds in-flight requests get to drain at shutdown, and again after SIGTERM "
        "(Triton's --exit-timeout-secs)",
    )
    serve.add_argument(
        "--latency-summaries",
        action="store_true",
        help="publish Triton's latency quantiles (p50..p99 summaries) on /metrics, as Grafana's "
        "quantile panels need; off by default: they cost 42%% of ResNet-50's throughput under "
        "load on an H100 (means come from the counters either way)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = ServerConfig(
        model_repository=args.model_repository,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        log_file=args.log_file,
        log_verbose=args.log_verbose,
        startup_timeout_s=args.startup_timeout,
        exit_timeout_s=args.exit_timeout,
        latency_summaries=args.latency_summaries,
    )
    try:
        return run_foreground(config)
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
