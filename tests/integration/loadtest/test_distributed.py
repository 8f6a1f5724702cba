"""A real Locust master with two worker processes against the session's real Triton.

The master runs the kit's headless stepped command
(``triton_kit.loadtest.runner.locust_command``) with ``--master``; the workers are separate
``locust --worker`` processes, as in docker-compose.yml. The users live only in the workers:
the master's stats CSV counts what the workers reported, each worker writes its own samples
beside the master's raw file, and ``triton_kit.loadtest.reports.summary.load_results`` merges
them. nmt is sent MAX_LENGTH 1000 (refused by the model), an option given to the master only:
it must reach the workers, and every nmt call must be counted as a failure while bert's calls
all succeed.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from tests.integration.loadtest.test_loadtest import _process
from tests.support.prerequisites import require_models
from triton_kit.loadtest import recorder
from triton_kit.loadtest.reports.summary import load_results
from triton_kit.loadtest.runner import LOCUSTFILES, RunConfig, locust_command
from triton_kit.server import TritonServer, free_port

WORKERS = 2


def _csv_rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path) as handle:
        return {row["Name"]: row for row in csv.DictReader(handle)}


def test_master_and_two_workers_count_requests_and_failures(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    require_models("bert", "nmt")
    port = free_port()
    config = RunConfig(
        models=["bert", "nmt"],
        steps="2",  # 2 users per class: 4 users over 2 workers
        step_time=10.0,
        settle_time=1.0,
        weights="nmt.beam=0",
        locust_args=["--max-length=1000"],
    )
    master = locust_command(triton_server.grpc_url, ["bert", "nmt"], config, tmp_path)
    master[-2:-2] = ["--master", "--master-bind-host", "127.0.0.1"]
    master[-2:-2] = ["--master-bind-port", str(port), "--expect-workers", str(WORKERS)]
    # No --host on the workers: the master hands it over at each start (compose does this).
    worker = [sys.executable, "-m", "locust", "-f", LOCUSTFILES, "--worker"]
    worker += ["--master-host", "127.0.0.1", "--master-port", str(port)]
    worker += ["--raw-out", str(tmp_path / "raw.npz")]

    with (
        _process(master, tmp_path / "master.log") as main,
        _process(worker, tmp_path / "worker-1.log") as one,
        _process(worker, tmp_path / "worker-2.log") as two,
    ):
        code = main.wait(timeout=60)
        log = (tmp_path / "master.log").read_text(errors="replace")
        assert code == 0, log[-3000:]
        workers_log = "".join((tmp_path / f"worker-{i}.log").read_text()[-2000:] for i in (1, 2))
        # 45 s: once in a full suite run a worker that had logged its exit (code 0) was still
        # alive 15 s later (interpreter shutdown); not reproduced alone (issue 13 note).
        assert one.wait(timeout=45) == 0 and two.wait(timeout=45) == 0, workers_log

    # Each worker wrote its own samples; the master (no users) wrote none.
    worker_files = sorted(tmp_path.glob("raw.worker-*.npz"))
    assert len(worker_files) == WORKERS, worker_files
    for path in worker_files:
        with np.load(path) as data:
            assert data["t"].size > 0, f"{path.name} holds no samples: that worker ran no user"
    with np.load(tmp_path / "raw.npz") as data:
        assert data["t"].size == 0

    # The master's CSV (the workers' reports) agrees with the merged raw samples per model.
    meta, arrays, traces = recorder.load(tmp_path / "raw.npz")
    assert len(traces) == WORKERS + 1  # every process traced its CPU
    names = [meta["models"][i] for i in arrays["model"]]
    sent = Counter(names)
    failed = Counter(n for n, ok in zip(names, arrays["ok"], strict=True) if not ok)
    rows = _csv_rows(tmp_path / "locust_stats.csv")
    per_model = Counter()
    per_model_failed = Counter()
    for name, row in rows.items():
        if name != "Aggregated":
            per_model[name.split()[0]] += int(row["Request Count"])
            per_model_failed[name.split()[0]] += int(row["Failure Count"])
    assert set(per_model) == {"bert", "nmt"}, rows.keys()
    assert all("beam" not in name for name in rows), rows.keys()  # weight 0 reached workers
    assert per_model == sent, (per_model, sent)
    assert per_model_failed == failed, (per_model_failed, failed)
    assert failed["bert"] == 0 and sent["bert"] > 0
    assert failed["nmt"] == sent["nmt"] > 0  # --max-length reached the workers

    # The kit's summary over the measured window: both models, failures counted.
    results = {r.model: r for r in load_results(tmp_path / "raw.npz", "grpc")}
    assert set(results) == {"bert", "nmt"}
    assert results["bert"].users == 2
    assert results["bert"].requests > 0 and results["bert"].failures == 0
    assert results["bert"].throughput_rps > 0
    assert results["nmt"].requests > 0 and results["nmt"].failures == results["nmt"].requests
    assert results["nmt"].throughput_rps == 0
