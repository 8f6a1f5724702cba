"""`python -m triton_kit.loadtest run` for real: failures counted, --weights, SLO exit codes,
embedded mode."""

from __future__ import annotations

import csv
import json
import socket
from pathlib import Path

from tests.integration.loadtest.test_loadtest import _run_loadtest
from tests.support.prerequisites import require_models
from triton_kit.server import TritonServer

SHORT = ["--steps", "1", "--step-time", "4", "--settle-time", "1"]


def _rows(out: Path) -> list[dict]:
    return json.loads((out / "summary.json").read_text())


def test_failed_requests_are_counted_and_breach_the_error_ratio(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    """MAX_LENGTH 1000 is refused by nmt: every call fails, and the run says so (exit 1)."""
    require_models("nmt")
    out = tmp_path / "failing"
    args = ["--host", triton_server.grpc_url, "--models", "nmt", *SHORT]
    args += ["--weights", "nmt.beam=0", "--slo-error-ratio", "0.01"]
    args += ["--locust-arg=--max-length=1000"]
    result = _run_loadtest(args, out)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "SLO breach: grpc nmt at 1 users" in result.stdout, result.stdout[-3000:]
    (row,) = _rows(out)
    assert row["requests"] > 0 and row["failures"] == row["requests"], row
    with open(out / "grpc" / "locust_stats.csv") as handle:
        names = {r["Name"] for r in csv.DictReader(handle)} - {"Aggregated"}
    assert names and all("beam" not in name for name in names), names  # weight 0: never ran


def test_error_ratio_within_the_slo_exits_zero(triton_server: TritonServer, tmp_path: Path) -> None:
    require_models("bert")
    out = tmp_path / "passing"
    args = ["--host", triton_server.http_url, "--models", "bert", *SHORT]
    result = _run_loadtest([*args, "--slo-error-ratio", "0.01"], out)
    assert result.returncode == 0, result.stdout[-3000:]
    (row,) = _rows(out)
    assert row["requests"] > 0 and row["failures"] == 0
    assert row["p50_ms"] <= row["p90_ms"] <= row["p95_ms"] <= row["p99_ms"]


def test_unreachable_server_exits_two(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "unreachable"
    args = ["--host", f"grpc://127.0.0.1:{port}", "--models", "bert", *SHORT]
    result = _run_loadtest(args, out)
    assert result.returncode == 2, result.stdout[-3000:]
    assert "load test failed" in result.stdout


def test_embedded_server_mode(model_repository: Path, tmp_path: Path) -> None:
    """No --host: the runner starts its own Triton on free ports and stops it afterwards."""
    require_models("bert")
    out = tmp_path / "embedded"
    args = ["--protocols", "http", "--models", "bert", *SHORT]
    result = _run_loadtest([*args, "--model-repository", str(model_repository)], out, timeout=150)
    assert result.returncode == 0, result.stdout[-3000:]
    (row,) = _rows(out)
    assert row["protocol"] == "http" and row["requests"] > 0 and row["failures"] == 0
