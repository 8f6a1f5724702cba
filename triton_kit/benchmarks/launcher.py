"""The kit's launcher against a bare ``tritonserver``: what the launch flags cost (DESIGN.md).

One repository, one model, one load (perf_analyzer, one-item requests at a concurrency),
served in turn by

* **bare**: the same binary with only ``--model-repository``, ``--backend-directory`` (the
  same assembled backends) and ports, as a Triton user would start it;
* **launcher**: ``python -m triton_kit.server serve`` with its default flags.

Rounds alternate (bare, launcher, bare, launcher, ...) so drift on a shared host falls on
both; the ratio is launcher / bare of the medians. Usable on CPU with a tiny python model::

    python -m triton_kit.benchmarks.launcher --out OUT --tiny
    python -m triton_kit.benchmarks.launcher --out OUT --repository REPO --model NAME -c 256
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks.harness import perf_analyzer
from triton_kit.benchmarks.harness.tiny_model import write_doubler


@dataclass(frozen=True)
class Options:
    out: Path
    repository: Path
    model: str
    concurrency: int
    seconds: float
    rounds: int
    report: Path | None = None  # a markdown report of the run, beside the JSON
    argv: tuple[str, ...] = ()


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repository", type=Path, help="model repository (default: --tiny's)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("-c", "--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2.0, help="perf_analyzer window")
    parser.add_argument("--rounds", type=int, default=2, help="bare/launcher pairs")
    parser.add_argument("--tiny", action="store_true", help="write and serve the tiny model")
    parser.add_argument("--report", type=Path, help="also write a markdown report here")
    args = parser.parse_args(argv)
    repository = args.repository
    if args.tiny or repository is None:
        repository = write_tiny(Path(tempfile.mkdtemp(prefix="launcher-repo-")))
    given = tuple(sys.argv[1:] if argv is None else argv)
    return Options(args.out, repository, args.model, args.concurrency, args.seconds, args.rounds,
                   args.report, given)  # fmt: skip


def write_tiny(repo: Path) -> Path:
    """The CPU stand-in for the launcher row, served as ``tiny``: the python-backend path,
    almost no work (the harness's doubler)."""
    write_doubler(repo, "tiny", max_batch_size=64, queue_delay_us=100)
    return repo


def bare_command(repository: Path, backends: Path, ports: list[int]) -> list[str]:
    """What a Triton user types: the repository, the backends, the ports, nothing else."""
    from triton_kit.server.binary import find_installation

    http, grpc, metrics = ports
    return [
        str(find_installation().binary),
        f"--model-repository={repository.resolve()}",
        f"--backend-directory={backends}",
        f"--http-port={http}",
        f"--grpc-port={grpc}",
        f"--metrics-port={metrics}",
    ]


def launcher_command(repository: Path, ports: list[int], log: Path) -> list[str]:
    """The kit's launcher with its default flags (only the ports and log are chosen)."""
    http, grpc, metrics = ports
    return [
        sys.executable, "-m", "triton_kit.server", "serve",
        "--model-repository", str(repository.resolve()),
        "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
        "--log-file", str(log),
    ]  # fmt: skip


def serve_and_measure(command: list[str], env: dict, http: int, grpc: int, options: Options,
                      log: Path) -> dict:  # fmt: skip
    """Start one server, wait until ready, run perf_analyzer once, stop it (SIGTERM)."""
    from triton_kit.server.launcher import wait_ready

    with open(log, "ab") as sink:
        process = subprocess.Popen(
            command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        if not wait_ready(f"http://127.0.0.1:{http}", 300.0, process=process):
            return {"error": f"not ready; see {log.name}"}
        return measure(f"127.0.0.1:{grpc}", options.model, options.concurrency,
                       options.seconds, options.out)  # fmt: skip
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM (the server drains), then SIGKILL to its process group after 60 s."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def measure(url: str, model: str, concurrency: int, seconds: float, out: Path, **shm) -> dict:
    """perf_analyzer, once more with a doubled window and looser stability if it did not
    settle (a shared host's noise is not the launcher's cost), and a last time accepting any
    two windows (marked ``unsettled``) so a noisy row is still reported. A first untimed
    window pays the model's first-use costs (allocator growth, library plans) at the batch
    sizes the batcher forms. ``shm``: perf_analyzer.run's keywords (shared memory, input
    data, cores)."""
    perf_analyzer.run(url, model, concurrency, 1.0, out, stability=100, **shm)
    row = perf_analyzer.run(url, model, concurrency, seconds, out, stability=20, **shm)
    if "error" in row:
        row = perf_analyzer.run(url, model, concurrency, 2 * seconds, out, stability=50, **shm)
        row["retried"] = True
    if "error" in row:
        row = perf_analyzer.run(url, model, concurrency, 2 * seconds, out, stability=100, **shm)
        row["unsettled"] = True
    return row


def round_order(number: int) -> tuple[str, str]:
    """Which server a round (numbered from 0) serves first: bare in even rounds, the launcher in
    odd ones, so that going first or second (a warmer GPU, a freed port, the other's teardown)
    falls on both alike. Session 47's rounds all served bare first, and the launcher led each."""
    return ("bare", "launcher") if number % 2 == 0 else ("launcher", "bare")


def compare(options: Options) -> dict:
    """Rounds of both servers, taking turns at going first (:func:`round_order`); the ratio of
    median throughputs, launcher / bare."""
    from triton_kit.server.binary import (
        assemble_backend_dir,
        find_installation,
        server_environment,
    )
    from triton_kit.server.launcher import free_ports

    installation = find_installation()
    backends = assemble_backend_dir(installation, Path(tempfile.mkdtemp(prefix="bare-")) / "b")
    env = server_environment(installation)
    rows: dict[str, list[dict]] = {"bare": [], "launcher": []}
    for number in range(options.rounds):
        for kind in round_order(number):
            ports = free_ports(3)
            log = options.out / f"launcher-row-{kind}-server.log"
            command = (
                bare_command(options.repository, backends, ports)
                if kind == "bare"
                else launcher_command(options.repository, ports, log)
            )
            run_env = env if kind == "bare" else dict(os.environ)
            rows[kind].append(serve_and_measure(command, run_env, ports[0], ports[1],
                                                options, log))  # fmt: skip
            print(kind, json.dumps(rows[kind][-1]), flush=True)
    return {"model": options.model, "concurrency": options.concurrency, **summarise(rows)}


def summarise(rows: dict[str, list[dict]]) -> dict:
    """Medians per kind and launcher/bare; a kind with no good round gives no ratio."""
    medians = {}
    for kind, runs in rows.items():
        rates = [r["items_per_s"] for r in runs if "items_per_s" in r]
        medians[kind] = statistics.median(rates) if rates else None
    ratio = (
        medians["launcher"] / medians["bare"] if medians["bare"] and medians["launcher"] else None
    )
    return {"runs": rows, "median_items_per_s": medians, "launcher_over_bare": ratio}


def round_ratios(runs: dict[str, list[dict]]) -> list[str]:
    """Launcher over bare within each round (both servers measured back to back)."""
    pairs = zip(runs.get("launcher", []), runs.get("bare", []), strict=False)
    return [f"{ours['items_per_s'] / bare['items_per_s']:.2f}"
            if "items_per_s" in ours and "items_per_s" in bare else "none"
            for ours, bare in pairs]  # fmt: skip


def _rate(items_per_s: float | None) -> str:
    return "none" if items_per_s is None else f"{items_per_s:,.0f}"


def report(result: dict, header: str) -> str:
    """The markdown report of one run: every round as measured, then the ratio."""
    from triton_kit.benchmarks.harness.measure import markdown_table

    rows: list[list[object]] = []
    for kind, runs in result["runs"].items():
        for number, run in enumerate(runs, 1):
            if "items_per_s" not in run:
                rows.append([kind, number, f"error: {run.get('error', '?')}".strip()])
                continue
            rows.append([kind, number, f"{run['items_per_s']:.0f}",
                         *(f"{run[q]:.2f}" for q in ("p50", "p95", "p99")),
                         "yes" if run.get("retried") else ""])  # fmt: skip
    ratio = result["launcher_over_bare"]
    medians = result["median_items_per_s"]
    lines = [
        header,
        f"`{result['model']}` at c{result['concurrency']}, one item a request, perf_analyzer "
        "(gRPC); each round serves both, bare first in odd rounds and the launcher first in even "
        "ones. *retried*: the window did not settle and was "
        "measured again with a doubled window and 50 % stability.",
        "",
        markdown_table(
            ["server", "round", "items/s", "p50 ms", "p95 ms", "p99 ms", "retried"], rows
        ),
        "",
        f"Medians: bare {_rate(medians['bare'])}, launcher {_rate(medians['launcher'])} items/s. "
        + (f"**launcher / bare = {ratio:.2f}**" if ratio else "no ratio: a kind had no good round"),
        "",
        f"Each round, launcher / bare: {', '.join(round_ratios(result['runs']))}. Where the "
        "machine's speed drifts over the run, a round's pair shows it less than the medians.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    from triton_kit.benchmarks.harness.measure import machine_description, report_header

    machine = machine_description()  # its load average is the start's, as it says
    load = f"load average {os.getloadavg()[0]:.2f} at start"
    result = {"date": started, **compare(options)}
    (options.out / "launcher_row.json").write_text(json.dumps(result, indent=2) + "\n")
    if options.report is not None:
        command = "python -m triton_kit.benchmarks.launcher " + " ".join(options.argv)
        title = "The kit's launcher against a bare tritonserver"
        header = report_header(
            title, command, f"{load}; shared machine: compare within this run", machine=machine
        )
        options.report.write_text(report(result, header))
    print(json.dumps({k: result[k] for k in ("median_items_per_s", "launcher_over_bare")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
