"""How ``bert_model`` spreads the thread budget: N single-thread instances or one instance.

Serves the built MiniLM ``bert`` (the tokenizer in a python-backend stub, which calls
``bert_model`` through BLS; Triton's own onnxruntime backend runs the encoder) with
``bert_model`` in three topologies of the same 2-thread budget, one server each,
alternating over rounds so that load drift hits all alike. (Until issue 31 the encoder ran
in the ``bert`` stub and these topologies were the stub's; benchmarks/results/
bert_topology.md was measured then.)

- ``2 x 1``: two instances with one intra-op thread each;
- ``1 x 2 spinning``: one instance, two threads, ONNX Runtime's default spinning pool (the
  build's default);
- ``1 x 2``: one instance, two threads that sleep when idle
  (``session.intra_op.allow_spinning: "0"``).

Texts (``--traffic``: short 8-16 tokens by default, medium 60-68, mixed 4-256) from the
SDK's AsyncTritonClient at concurrency 1, 8 and 32; the
encoder time per call (the stub's BLS call, round trip included) comes from the stub's
``ExecuteProfile``. The baseline, measured in
the same run: the same ONNX file in one single-thread session in this process, one text at a
time, warm.
Writes benchmarks/results/bert_topology.md. Run ``python -m triton_kit.build_engines bert`` first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.bert.run import TRAFFIC, Setup, model_setup, run_triton, traffic_pool
from triton_kit.benchmarks.harness.measure import machine_description, markdown_table, report_header
from triton_kit.python_models.bert.text import tokenize
from triton_kit.python_models.common.base import PROFILE_DIR_ENV
from triton_kit.python_models.common.ort_session import (
    ALLOW_SPINNING,
    SessionSettings,
    create_session,
)

ROOT = Path(__file__).resolve().parents[3]
MODELS = ("bert", "bert_model", "bert_preprocess")


@dataclass(frozen=True)
class Topology:
    label: str
    instances: int
    threads: int
    spinning: bool


TOPOLOGIES = (
    Topology("2 x 1", 2, 1, True),
    Topology("1 x 2 spinning", 1, 2, True),
    Topology("1 x 2", 1, 2, False),
)


def write_repository(source: Path, target: Path, topology: Topology) -> Path:
    """``source``'s bert models with ``bert_model``'s instances and session rewritten."""
    from triton_kit.build_engines.repository import parse, render, set_instances, set_parameters

    for name in MODELS:
        shutil.copytree(source / name, target / name)
    path = target / "bert_model" / "config.pbtxt"
    config = parse(path.read_text())
    set_instances(config, topology.instances)
    if ALLOW_SPINNING in config.parameters:
        del config.parameters[ALLOW_SPINNING]
    session = {"intra_op_thread_count": topology.threads, "inter_op_thread_count": 1}
    if not topology.spinning:
        session[ALLOW_SPINNING] = 0
    set_parameters(config, session)
    path.write_text(render(config))
    return target


def encoder_ms(profile_dir: Path) -> float:
    """Mean encoder time per execute over every stub of the last server."""
    seconds, executes = 0.0, 0
    for path in profile_dir.glob("bert-*.json"):
        summary = json.loads(path.read_text())
        seconds += summary["ms_per_execute"].get("encoder_bls", 0.0) * summary["executes"]
        executes += summary["executes"]
    return seconds / executes if executes else float("nan")


def serve_cells(repo: Path, texts: list[str], concurrency: tuple[int, ...], seconds: float):
    from triton_kit.server import ServerConfig, TritonServer

    profile = Path(tempfile.mkdtemp(prefix="bert-topology-profile-"))
    os.environ[PROFILE_DIR_ENV] = str(profile)  # the stubs inherit it
    log = repo / "tritonserver.log"
    config = ServerConfig(repo, http_port=0, grpc_port=0, metrics_port=0, log_file=log)
    rows = {}
    try:
        with TritonServer(config) as server:
            asyncio.run(run_triton(server.grpc_url, "bert", texts[:20], 2, 1.0))  # warm-up
            for users in concurrency:
                latencies, wall = asyncio.run(
                    run_triton(server.grpc_url, "bert", texts, users, seconds)
                )
                rows[users] = (latencies, len(latencies) / wall)
        return rows, encoder_ms(profile)
    finally:
        os.environ.pop(PROFILE_DIR_ENV, None)
        shutil.rmtree(profile, ignore_errors=True)


def in_process(setup: Setup, texts: list[str], seconds: float) -> tuple[list[float], float, float]:
    """The baseline: one warm single-thread session of the served ONNX file, one text a call."""
    session = create_session(setup.onnx, SessionSettings(1, 1))
    latencies, encoder = [], []
    start = time.perf_counter()
    index = 0
    while time.perf_counter() - start < seconds:
        sent = time.perf_counter()
        for _, feeds in tokenize(setup.tokenizer, [texts[index % len(texts)]], setup.buckets):
            began = time.perf_counter()
            session.run(None, feeds)
            encoder.append(time.perf_counter() - began)
        latencies.append(time.perf_counter() - sent)
        index += 1
    wall = time.perf_counter() - start
    return latencies, len(latencies) / wall, float(np.mean(encoder) * 1e3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--output", type=Path, default=RESULTS / "bert_topology.md")
    parser.add_argument("--seconds", type=float, default=4.0, help="per cell (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="topologies alternate (default 2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--traffic", choices=sorted(TRAFFIC), default="short", help="text lengths (default short)"
    )
    args = parser.parse_args(argv)

    machine = machine_description()
    setup = model_setup(args.model_repository, "bert")
    texts = traffic_pool(setup.tokenizer, *TRAFFIC[args.traffic], seed=0)
    measured: dict[str, dict[int, list]] = {t.label: {} for t in TOPOLOGIES}
    encoders: dict[str, list[float]] = {t.label: [] for t in TOPOLOGIES}
    baseline: list[tuple[list[float], float, float]] = []
    for round_ in range(args.rounds):
        baseline.append(in_process(setup, texts, args.seconds))
        for topology in TOPOLOGIES:
            print(f"round {round_ + 1}: {topology.label}", flush=True)
            with tempfile.TemporaryDirectory(prefix="bert-topology-") as work:
                repo = write_repository(args.model_repository, Path(work), topology)
                rows, encoder = serve_cells(repo, texts, tuple(args.concurrency), args.seconds)
            encoders[topology.label].append(encoder)
            for users, row in rows.items():
                measured[topology.label].setdefault(users, []).append(row)
    report = render_report(args, machine, measured, encoders, baseline)
    args.output.write_text(report)
    print(report)
    return 0


def _pooled(rows: list) -> tuple[np.ndarray, float]:
    latencies = np.concatenate([np.asarray(lat) for lat, _ in rows]) * 1e3
    return latencies, float(np.mean([rate for _, rate in rows]))


def render_report(args, machine: str, measured, encoders, baseline) -> str:
    base_lat = np.concatenate([np.asarray(lat) for lat, _, _ in baseline]) * 1e3
    base_rate = float(np.mean([rate for _, rate, _ in baseline]))
    base_encoder = float(np.mean([enc for _, _, enc in baseline]))
    rows = [["in-process, 1 session x 1 thread (baseline)", 1, base_rate,
             *np.percentile(base_lat, [50, 95, 99]), 1.0, base_encoder]]  # fmt: skip
    for label, cells in measured.items():
        for users, cell in sorted(cells.items()):
            latencies, rate = _pooled(cell)
            encoder = float(np.mean(encoders[label]))
            rows.append([f"Triton {label}", users, rate, *np.percentile(latencies, [50, 95, 99]),
                         rate / base_rate, encoder])  # fmt: skip
    rows = [[r[0], r[1], *(round(float(v), 2) for v in r[2:])] for r in rows]
    table = markdown_table(
        ["engine", "conc.", "req/s", "p50 ms", "p95 ms", "p99 ms", "/ baseline req/s",
         "encoder ms per call"],
        rows,
    )  # fmt: skip
    return "\n".join(
        [
            report_header(
                "BERT encoder topology: N single-thread instances or one with N threads",
                command=f"python -m triton_kit.benchmarks.bert.topology --traffic {args.traffic} "
                f"--rounds {args.rounds} --seconds {args.seconds:g}",
                load=f"{args.traffic} texts, {args.rounds} rounds of {args.seconds:g} s per cell; "
                "no GPU, server and client share the cores (compare ratios within this run); "
                f"1-min load average at end {os.getloadavg()[0]:.2f}",
                machine=machine,
            ),
            __doc__.split("\n\n", 1)[1].strip(),
            "",
            "Latencies pooled over rounds, req/s the mean over rounds. `encoder ms per call`:",
            "the stub's BLS call to bert_model per execute (ExecuteProfile), all concurrencies",
            "together;",
            "for the baseline, the same call in this process.",
            "",
            table,
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
