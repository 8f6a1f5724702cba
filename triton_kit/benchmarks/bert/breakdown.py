"""Where one text's served time goes at concurrency 1: Triton's own statistics per model.

Why (issue 31): the served ``bert`` is compared with in-process at concurrency 1 (goal:
within +0.3 ms p50 on short texts). The SDK's wall-clock p50 on the shared 2 cores says
how far off it is, not where the time goes. This sends one text at a time (the SDK over
gRPC, closed loop) to a server of ``bert`` and ``bert_model`` alone and reads Triton's
inference statistics of both models around the run (``bert``'s queue and compute,
``bert_model``'s queue and compute: the onnxruntime backend's input copy, session run and
output copy) and the ``bert`` stub's own execute profile (``TRITON_KIT_PROFILE_DIR``: the
execute and its BLS call). The BLS round trip is the stub's BLS call less ``bert_model``'s
queue and compute; the python backend's IPC for ``bert``'s own request and response is
Triton's compute of ``bert`` less the stub's execute. The same texts
also run in process (tokenise, then the encoder's ONNX file in a session with
``bert_model``'s options), alternating with the served runs.

Run ``python -m triton_kit.benchmarks.bert.breakdown``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.bert.run import TRAFFIC, model_setup, traffic_pool
from triton_kit.python_models.bert.text import token_ids, tokenize
from triton_kit.python_models.common.base import PROFILE_DIR_ENV
from triton_kit.python_models.common.ort_session import create_session

ROOT = Path(__file__).resolve().parents[3]
MODELS = ("bert", "bert_model", "bert_preprocess")
PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


def statistics(url: str, model: str) -> dict[str, float]:
    """Triton's cumulative (count, ns per phase) for ``model``."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    inference = stats["inference_stats"]
    values = {"count": float(inference["success"].get("count", 0))}
    values.update({phase: float(inference[phase].get("ns", 0)) for phase in PHASES})
    return values


def served(url: str, texts: list[str]) -> list[float]:
    from triton_kit.client import TritonClient

    latencies = []
    with TritonClient(url, timeout=60) as client:
        for text in texts:
            start = time.perf_counter()
            client.embed(text)
            latencies.append(time.perf_counter() - start)
    return latencies


def in_process(session, setup, texts: list[str]) -> tuple[list[float], list[float]]:
    """(whole call, tokenise only) per text."""
    latencies, tokenising = [], []
    for text in texts:
        start = time.perf_counter()
        token_ids(setup.tokenizer, [text])
        tokenising.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _, feeds in tokenize(setup.tokenizer, [text], setup.buckets):
            session.run(None, feeds)
        latencies.append(time.perf_counter() - start)
    return latencies, tokenising


def stub_profile(directory: Path) -> dict[str, float]:
    """The ``bert`` stub's ms per execute by phase (``ExecuteProfile``)."""
    (path,) = directory.glob("bert-*.json")
    return json.loads(path.read_text())["ms_per_execute"]


def per_request_ms(before: dict, after: dict) -> dict[str, float]:
    count = after["count"] - before["count"]
    return {phase: (after[phase] - before[phase]) / count / 1e6 for phase in PHASES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--traffic", choices=sorted(TRAFFIC), default="short")
    parser.add_argument("--requests", type=int, default=400, help="per round (default 400)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from triton_kit.server import ServerConfig, TritonServer

    setup = model_setup(args.model_repository, "bert")
    texts = traffic_pool(setup.tokenizer, *TRAFFIC[args.traffic], seed=0)
    texts = [texts[i % len(texts)] for i in range(args.requests)]
    session = create_session(setup.onnx, setup.session)
    in_process(session, setup, texts[:50])  # warm: every length once
    work = Path(tempfile.mkdtemp(prefix="bert-breakdown-"))
    profiles = Path(tempfile.mkdtemp(prefix="bert-breakdown-profiles-"))  # not a model
    os.environ[PROFILE_DIR_ENV] = str(profiles)  # the stubs inherit it
    for name in MODELS:
        shutil.copytree(args.model_repository / name, work / name, copy_function=os.symlink)
    config = ServerConfig(work, http_port=0, grpc_port=0, metrics_port=0, log_file=work / "log")
    local, tokenising, remote = [], [], []
    with TritonServer(config) as server:
        served(server.grpc_url, texts[:50])
        first = {m: statistics(server.grpc_url, m) for m in ("bert", "bert_model")}
        for _ in range(args.rounds):
            whole, tokens = in_process(session, setup, texts)
            local += whole
            tokenising += tokens
            remote += served(server.grpc_url, texts)
        last = {m: statistics(server.grpc_url, m) for m in ("bert", "bert_model")}
    stub = stub_profile(profiles)  # written when the stub unloads
    for folder in (work, profiles):
        shutil.rmtree(folder, ignore_errors=True)
    bert, encoder = (per_request_ms(first[m], last[m]) for m in ("bert", "bert_model"))
    p50 = {k: float(np.median(v)) * 1e3 for k, v in (("in", local), ("served", remote))}
    mean = {k: float(np.mean(v)) * 1e3 for k, v in (("in", local), ("served", remote))}
    encoder_total = sum(encoder.values())
    bert_total = sum(bert.values())
    bls_call = stub["encoder_bls"]
    rows = [
        ("in-process p50 / mean (tokenise + session.run)", p50["in"], mean["in"]),
        ("served p50 / mean (SDK, gRPC)", p50["served"], mean["served"]),
        ("served - in-process", p50["served"] - p50["in"], mean["served"] - mean["in"]),
        ("bert in Triton: queue + compute", None, bert_total),
        ("  python backend IPC for bert's request and response", None,
         bert_total - bert["queue"] - stub["execute"]),
        ("  bert stub's execute (includes warm-up requests)", None, stub["execute"]),
        ("    tokenise, pad, respond (execute less the BLS call)", None,
         stub["execute"] - bls_call),
        ("    the BLS call to bert_model", None, bls_call),
        ("      bert_model queue", None, encoder["queue"]),
        ("      bert_model compute (input, infer, output)", None,
         encoder_total - encoder["queue"]),
        ("      BLS round trip (the call less bert_model's queue and compute)", None,
         bls_call - encoder_total),
        ("outside bert: client, gRPC, Triton core", None, mean["served"] - bert_total),
    ]  # fmt: skip
    print(f"{args.traffic} texts, {args.rounds} x {args.requests} requests at concurrency 1; "
          f"load average {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| what | p50 ms | mean ms |\n| --- | ---: | ---: |")
    for label, median, average in rows:
        print(f"| {label} | {'-' if median is None else f'{median:.2f}'} | {average:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
