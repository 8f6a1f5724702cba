"""Load-generator calibration: how many requests/s can the Locust user drive, per protocol?

Compared with a plain asyncio loop on tritonclient's aio client, same machine, same server,
same trivial model (a python-backend identity with BERT's TEXT -> EMBEDDING contract,
written to a temporary repository, so the Locust user is the real ``BertUser``). Each
generator runs as its own process at several concurrencies; we keep its best rate and its
CPU time per request (from the kernel's accounting of the child), which says what the
generator could reach if the server were not sharing the cores.
Writes benchmarks/results/loadgen.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import closed_loop_summary

ROOT = Path(__file__).resolve().parents[3]
MODEL = "identity"
IDENTITY_CONFIG = f"""name: "{MODEL}"
backend: "python"
max_batch_size: 64
input {{ name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] }}
output {{ name: "EMBEDDING" data_type: TYPE_FP32 dims: [ 4 ] }}
instance_group {{ count: 1 kind: KIND_CPU }}
"""
IDENTITY_MODEL = '''"""Trivial: a constant embedding per request (the client is measured)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            vector = np.full((text.shape[0], 4), 0.5, dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("EMBEDDING", vector)]))
        return responses
'''
WARMUP_S = 2.0
GOAL = 0.9  # issue 13: the Locust user reaches >= 0.9x the plain client
LOCUST = "Locust BertUser (SDK), 1 process"
LOCUST_GENERATORS = {1: LOCUST, 2: "Locust BertUser (SDK), --processes 2"}
# gRPC: the Locust rows above use the native sidecar (--grpc-transport sidecar-native);
# the Python sidecar and the transport before any sidecar (issue 13's 0.63x) for comparison.
LOCUST_PYTHON = "Locust BertUser (SDK), 1 process, --grpc-transport sidecar-python"
LOCUST_GEVENT = "Locust BertUser (SDK), 1 process, --grpc-transport gevent"
# gRPC only: the Locust user's SDK calls over each sidecar, with no Locust (the cost split).
SPLIT = "SDK over the native sidecar, greenlets, no Locust"
SPLIT_PYTHON = "SDK over the Python sidecar, greenlets, no Locust"
SPLITS = {"native": SPLIT, "python": SPLIT_PYTHON}
PLAIN = "plain asyncio tritonclient.aio"
SENTENCE = "The customer reviewed the quarterly report before the meeting started."


def write_identity_repository(root: Path) -> Path:
    """A one-model repository in ``root`` (kept out of model_repository/)."""
    version = root / MODEL / "1"
    version.mkdir(parents=True)
    (root / MODEL / "config.pbtxt").write_text(IDENTITY_CONFIG)
    (version / "model.py").write_text(IDENTITY_MODEL)
    return root


@dataclass(frozen=True)
class Measurement:
    protocol: str
    generator: str
    concurrency: int
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_request: float
    sidecar_cpu_ms_per_request: float = float("nan")  # SPLIT only: the sidecar's share


def measure_locust(
    url: str,
    protocol: str,
    users: int,
    duration: float,
    out: Path,
    processes: int = 1,
    transport: str = "sidecar-native",
) -> Measurement:
    """The real BertUser, headless, one step of ``users`` after a settle period."""
    from triton_kit.loadtest.runner import RunConfig, run_protocol

    config = RunConfig(
        models=["bert"],
        steps=str(users),
        step_time=duration + WARMUP_S,
        settle_time=WARMUP_S,
        weights="bert.numbers=0",  # one payload kind, as in the plain loop
        model_names=[f"bert={MODEL}"],
        locust_args=(["--processes", str(processes)] if processes > 1 else [])
        + (["--grpc-transport", transport] if protocol == "grpc" else []),
    )
    target = out / f"locust-{protocol}-{users}-{processes}-{time.monotonic_ns()}"
    (result,) = run_protocol(url, config, target)
    named = {"gevent": LOCUST_GEVENT, "sidecar-python": LOCUST_PYTHON}
    name = named.get(transport, LOCUST_GENERATORS[processes])
    return Measurement(
        protocol, name, users, result.requests, result.throughput_rps,
        result.p50_ms, result.p99_ms, 1000.0 * result.client_cpu_s / max(result.requests, 1),
    )  # fmt: skip


def _json_child(command: list[str], duration: float) -> dict:
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=duration + 60, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_plain(url: str, protocol: str, concurrency: int, duration: float) -> Measurement:
    """One plain asyncio process (``plain`` sub-command), so neither generator shares a GIL."""
    command = [sys.executable, "-m", "triton_kit.benchmarks.loadgen", "plain", "--url", url]
    command += ["--concurrency", str(concurrency), "--duration", str(duration)]
    row = _json_child(command, duration)
    return Measurement(
        protocol, PLAIN, concurrency, row["requests"], row["rps"], row["p50_ms"], row["p99_ms"],
        row["cpu_ms_per_request"],
    )  # fmt: skip


def measure_split(url: str, concurrency: int, duration: float, kind: str) -> Measurement:
    """The SDK over the ``kind`` sidecar in greenlets without Locust (``loadgen_split``)."""
    command = [
        sys.executable,
        "-m",
        "triton_kit.benchmarks.loadgen.split",
        "--url",
        url,
        "--model",
        MODEL,
    ]
    command += ["--concurrency", str(concurrency), "--duration", str(duration), "--kind", kind]
    row = _json_child([*command, "--text", SENTENCE], duration)
    own, sidecar = row["process_cpu_ms_per_request"], row["sidecar_cpu_ms_per_request"]
    return Measurement(
        "grpc", SPLITS[kind], concurrency, row["requests"], row["rps"], row["p50_ms"],
        row["p99_ms"], own + sidecar, sidecar,
    )  # fmt: skip


async def plain_loop(url: str, concurrency: int, duration: float) -> dict[str, float]:
    """``concurrency`` closed loops on one aio client; runs in its own process."""
    from triton_kit.client.transport import Endpoint

    endpoint = Endpoint.parse(url)
    if endpoint.protocol == "grpc":
        import tritonclient.grpc.aio as module
    else:
        import tritonclient.http.aio as module
    client = module.InferenceServerClient(endpoint.address)
    text = np.array([[SENTENCE.encode()]], dtype=np.object_)
    latencies: list[float] = []
    measure_from = time.perf_counter() + WARMUP_S
    stop_at = measure_from + duration

    async def worker() -> None:
        while (started := time.perf_counter()) < stop_at:
            tensor = module.InferInput("TEXT", [1, 1], "BYTES")
            tensor.set_data_from_numpy(text)
            result = await client.infer(MODEL, [tensor])
            result.as_numpy("EMBEDDING")
            if started >= measure_from:
                latencies.append(time.perf_counter() - started)

    async def cpu_window() -> tuple[float, float]:
        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        first = time.process_time()
        await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
        return first, time.process_time()

    try:
        window, *_ = await asyncio.gather(cpu_window(), *(worker() for _ in range(concurrency)))
    finally:
        await client.close()
    return {
        **closed_loop_summary(latencies, duration),
        "cpu_ms_per_request": 1000.0 * (window[1] - window[0]) / max(len(latencies), 1),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.loadgen", description=__doc__
    )
    sub = parser.add_subparsers(dest="command")
    plain = sub.add_parser("plain", help="internal: one plain asyncio measurement, JSON out")
    plain.add_argument("--url", required=True)
    plain.add_argument("--concurrency", type=int, default=8)
    plain.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per point")
    parser.add_argument("--concurrency", default="4,16", help="users / loops per point")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over every point")
    parser.add_argument("--protocols", default="grpc,http")
    parser.add_argument("--output", type=Path, default=RESULTS / "loadgen.md")
    args = parser.parse_args(argv)
    if args.command != "plain":
        args.protocols = args.protocols.split(",")
        args.levels = [int(c) for c in args.concurrency.split(",")]
    return args


def measure_point(
    url: str, protocol: str, level: int, args: argparse.Namespace, tmp: Path
) -> list[Measurement]:
    points = [
        measure_plain(url, protocol, level, args.duration),
        measure_locust(url, protocol, level, args.duration, tmp),
        measure_locust(url, protocol, level, args.duration, tmp, processes=2),
    ]
    if protocol == "grpc":
        for transport in ("sidecar-python", "gevent"):
            points.append(
                measure_locust(url, protocol, level, args.duration, tmp, transport=transport)
            )
        points += [measure_split(url, level, args.duration, kind) for kind in SPLITS]
    for m in points:
        print(f"{protocol} {m.generator} x{level}: {m.rps:.0f} req/s", flush=True)
    return points


def calibrate(args: argparse.Namespace) -> list[Measurement]:
    from triton_kit.server import ServerConfig, TritonServer

    measurements: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="loadgen-") as tmp:
        repository = write_identity_repository(Path(tmp) / "repository")
        config = ServerConfig(
            model_repository=repository, http_port=0, grpc_port=0, metrics_port=0,
            log_file=Path(tmp) / "tritonserver.log",
        )  # fmt: skip
        with TritonServer(config) as server:
            for protocol in args.protocols:
                url = server.grpc_url if protocol == "grpc" else server.http_url
                for _ in range(args.repeats):  # interleaved: drift hits every generator
                    for level in args.levels:
                        measurements += measure_point(url, protocol, level, args, Path(tmp))
    return measurements
