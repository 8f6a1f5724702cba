"""Where BERT's concurrency-1 gap goes, on quiet pinned cores of the lent machine's CPU.

benchmarks/results/bert.md: at concurrency 1 short texts, served p50 = in-process p50 + the no-op
floor's p50 + about 0.7 ms unexplained. Candidates: the client process sharing the server's
two cores, or the encoder running slower inside the stub. This serves ``bert`` and the floor
model with the server pinned to two cores, then times sequential requests from a client
process pinned to those same cores or to a third one (a remote client's situation), and
reads the stub's own encoder time (``TRITON_KIT_PROFILE_DIR``) beside the in-process one.
Since issue 31 the stub holds no encoder: its encoder phase is the BLS call to ``bert_model``
(``encoder_bls``), which Triton's own backend runs.

Usage (scripts/gpu/bench.sh): python -m scripts.gpu.diagnostics.probe_bert_c1 REPO OUT
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cores(name: str, default: str) -> set[int]:
    return {int(c) for c in os.environ.get(name, default).split(",")}


SERVER_CORES = _cores("PROBE_SERVER_CORES", "2,3")
OTHER_CORE = _cores("PROBE_CLIENT_CORE", "4")
REQUESTS = int(os.environ.get("PROBE_REQUESTS", "400"))
ROUNDS = int(os.environ.get("PROBE_ROUNDS", "3"))
CLIENT = r"""
import asyncio, json, sys, time
from triton_kit.client import AsyncTritonClient
url, model, texts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
async def main():
    client = AsyncTritonClient(url, models={"embed": model})
    for text in texts[:20]:
        await client.embed(text)
    out, cpu = [], time.process_time()
    for text in texts:
        start = time.perf_counter()
        await client.embed(text)
        out.append(time.perf_counter() - start)
    await client.close()
    print(json.dumps({"lat": out, "cpu": time.process_time() - cpu}))
asyncio.run(main())
"""


def served(url: str, model: str, texts: list[str], cores: set[int]) -> dict:
    command = ["taskset", "-c", ",".join(map(str, sorted(cores))), sys.executable, "-c", CLIENT]
    done = subprocess.run([*command, url, model, json.dumps(texts)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def in_process(setup, session, texts: list[str]) -> dict:
    from triton_kit.python_models.bert.text import tokenize

    out, runs = [], []
    for text in texts:
        start = time.perf_counter()
        for _, feeds in tokenize(setup.tokenizer, [text], setup.buckets):
            before = time.perf_counter()
            session.run(None, feeds)
            runs.append(time.perf_counter() - before)
        out.append(time.perf_counter() - start)
    return {"lat": out, "run": runs}


def perf_analyzer_rows(url: str, text: str, out: Path) -> dict[str, list[float]]:
    """p50 from perf_analyzer (C++ client) at concurrency 1, one short text, both placements."""
    from triton_kit.benchmarks.harness import perf_analyzer

    data = out / "probe-text.json"
    data.write_text(json.dumps({"data": [{"TEXT": [text]}]}))
    rows = {}
    for model in ("bert", "bert_floor"):
        for where, cores in (("same cores", SERVER_CORES), ("own core", OTHER_CORE)):
            os.sched_setaffinity(0, cores)  # perf_analyzer inherits it
            try:
                result = perf_analyzer.run(url, model, 1, 3.0, out, str(data))
            finally:
                os.sched_setaffinity(0, SERVER_CORES)
            key = f"{model}, perf_analyzer on {where}"
            rows[key] = [result["p50"]] if "p50" in result else []
            if "p50" not in result:
                print(key, result, flush=True)
    return rows


def stub_encoder_ms(profile_dir: Path) -> dict:
    found = {}
    for path in profile_dir.glob("bert-*.json"):
        found = json.loads(path.read_text())
    return found


def main() -> int:
    from triton_kit.benchmarks.bert import run as B
    from triton_kit.benchmarks.harness.floor_model import write_floor_model
    from triton_kit.python_models.common.ort_session import create_session
    from triton_kit.server import ServerConfig, TritonServer

    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    os.sched_setaffinity(0, SERVER_CORES)
    repo = Path(tempfile.mkdtemp()) / "repo"
    repo.mkdir()
    B.copy_models(source, repo, ["bert", "bert_preprocess", "bert_model"])
    write_floor_model(repo, "bert_floor", 384, 32)
    setup = B.model_setup(repo, "bert")
    texts = B.traffic_pool(setup.tokenizer, 8, 16, seed=0)[:REQUESTS]
    session = create_session(setup.onnx, setup.session)
    in_process(setup, session, texts[:50])
    profile = Path(tempfile.mkdtemp())
    os.environ["TRITON_KIT_PROFILE_DIR"] = str(profile)
    log = out / "probe-server.log"
    rows: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    config = ServerConfig(repo, http_port=0, grpc_port=0, metrics_port=0, log_file=log)
    with TritonServer(config) as server:
        for _ in range(ROUNDS):
            local = in_process(setup, session, texts)
            rows.setdefault("in-process", []).append(statistics.median(local["lat"]) * 1e3)
            rows.setdefault("in-process session.run", []).append(
                statistics.median(local["run"]) * 1e3
            )
            for model in ("bert", "bert_floor"):
                for where, cores in (("same cores", SERVER_CORES), ("own core", OTHER_CORE)):
                    result = served(server.grpc_url, model, texts, cores)
                    key = f"{model}, client on {where}"
                    rows.setdefault(key, []).append(statistics.median(result["lat"]) * 1e3)
                    cpu.setdefault(key, []).append(result["cpu"] * 1e3 / len(texts))
        rows.update(perf_analyzer_rows(server.grpc_url, texts[0], out))
        time.sleep(1)
    stub = stub_encoder_ms(profile)
    lines = [
        f"| {k} | {' / '.join(f'{v:.2f}' for v in vs)} | "
        f"{' / '.join(f'{c:.3f}' for c in cpu.get(k, []))} |"
        for k, vs in rows.items()
    ]
    report = "\n".join(
        [
            "| what | p50 ms per round | client CPU ms/req per round |",
            "|---|---|---|",
            *lines,
            "",
            f"stub profile (ms per execute, all rounds and both client placements): {stub}",
        ]
    )
    (out / "probe-bert-c1.md").write_text(report + "\n")
    print(report)
    shutil.rmtree(repo.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
