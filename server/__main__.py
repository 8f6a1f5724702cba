"""Command line: ``python -m server serve`` runs Triton in the foreground."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from server.errors import ServerError
from server.launcher import ServerConfig, run_foreground


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m server",
        description="Run a real Triton Inference Server on a model repository. The binary is "
        "$TRITONSERVER, else `tritonserver` on PATH (the official container), else the one "
        "bundled in the nvidia-pytriton wheel (CPU machines, no Docker).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve in the foreground until Ctrl-C")
    serve.add_argument("--model-repository", type=Path, default=ServerConfig.model_repository)
    serve.add_argument(
        "--host",
        default=os.environ.get("HOST", "127.0.0.1"),
        help="address to bind HTTP, gRPC and metrics to (default 127.0.0.1; 0.0.0.0 exposes it)",
    )
    serve.add_argument("--http-port", type=int, default=_env_int("HTTP_PORT", 8000))
    serve.add_argument("--grpc-port", type=int, default=_env_int("GRPC_PORT", 8001))
    serve.add_argument("--metrics-port", type=int, default=_env_int("METRICS_PORT", 8002))
    serve.add_argument(
        "--log-file", type=Path, default=None, help="default logs/tritonserver-<port>.log"
    )
    serve.add_argument("--log-verbose", type=int, default=0)
    serve.add_argument(
        "--startup-timeout", type=float, default=300.0, help="seconds to wait for ready"
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
    )
    try:
        return run_foreground(config)
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
