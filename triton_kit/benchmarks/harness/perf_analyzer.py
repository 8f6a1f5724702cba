"""perf_analyzer (Triton's C++ load generator) as one benchmark engine among the others.

What Triton users measure with: C++ clients that leave the CPU to the server. Beside the
kit's Python SDK it tells the serving path's own cost from the Python client's. The binary
comes from ``PERF_ANALYZER`` or ``<venv>/bin/perf_analyzer``
(scripts/install-perf-analyzer.sh here, scripts/gpu/bench.sh on the lent GPU machine).
"""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# The "Server:" block perf_analyzer prints: the model's counts over the measured windows.
# What perf_analyzer speaks to the server: unary gRPC, HTTP, or gRPC with every request on one
# bidirectional stream (``--streaming``: no call setup per request).
PROTOCOLS = ("grpc", "http", "grpc-stream")


def endpoint(protocol: str) -> str:
    """The server endpoint a protocol of :data:`PROTOCOLS` goes to: "http" or "grpc"."""
    return "http" if protocol == "http" else "grpc"


SERVER_COUNTS = re.compile(r"Inference count: (\d+)\s+Execution count: (\d+)")


@dataclass(frozen=True)
class CApi:
    """perf_analyzer's ``triton_c_api`` service kind: Triton inside perf_analyzer's own process,
    serving ``repository`` from ``server_dir`` (:func:`c_api_server_dir`), with no gRPC between
    them: a c1 row measured this way and over gRPC splits the served latency into Triton's part
    and the network's."""

    server_dir: Path
    repository: Path


def c_api_server_dir(dest: Path, backends: Path) -> Path:
    """What ``--triton-server-directory`` must hold, in ``dest``: ``lib/libtritonserver.so``
    (the installation's, which the wheel ships renamed) and ``backends`` (a link to
    ``backends``, e.g. the launcher's assembled folder)."""
    from triton_kit.server.binary import find_installation

    installation = find_installation()
    library = installation.server_library
    if library is None:
        raise FileNotFoundError(f"no libtritonserver.so beside {installation.binary}")
    (dest / "lib").mkdir(parents=True, exist_ok=True)
    (dest / "lib" / "libtritonserver.so").symlink_to(library)
    (dest / "backends").symlink_to(backends.resolve(), target_is_directory=True)
    return dest


def binary() -> str | None:
    """The perf_analyzer to run, or None when it is not installed."""
    named = os.environ.get("PERF_ANALYZER")
    if named:
        return named
    beside = Path(sys.executable).parent / "perf_analyzer"
    return str(beside) if beside.exists() else shutil.which("perf_analyzer")


def text_inputs(path: Path, name: str, texts: Sequence[str]) -> str:
    """A ``--input-data`` file sending ``texts`` in turn, one per request."""
    path.write_text(json.dumps({"data": [{name: [text]} for text in texts]}))
    return str(path)


def tensor_inputs(path: Path, requests: Sequence[Mapping[str, np.ndarray]]) -> str:
    """A ``--input-data`` file sending ``requests`` in turn: each maps an input name to one
    item's tensor (no batch dimension), whose shape goes with it (for variable dims)."""
    data = [
        {name: {"content": array.ravel().tolist(), "shape": list(array.shape)}
         for name, array in request.items()}
        for request in requests
    ]  # fmt: skip
    path.write_text(json.dumps({"data": data}))
    return str(path)


def bytes_inputs(path: Path, name: str, items: Sequence[bytes]) -> str:
    """A ``--input-data`` file sending ``items`` in turn, one BYTES element per request (encoded
    images): base64 of Triton's serialised element (a little-endian uint32 length, then the
    bytes), which perf_analyzer sends as it is."""
    data = [{name: {"b64": _b64(struct.pack("<I", len(item)) + item)}} for item in items]
    path.write_text(json.dumps({"data": data}))
    return str(path)


def array_inputs(path: Path, name: str, arrays: Sequence[np.ndarray]) -> str:
    """A ``--input-data`` file sending ``arrays`` in turn (one item each, no batch dimension)
    as base64 of their raw bytes, with their shapes: compact for large tensors (decoded
    images), where :func:`tensor_inputs` writes every element as JSON text."""
    data = [
        {name: {"b64": _b64(np.ascontiguousarray(a).tobytes()), "shape": list(a.shape)}}
        for a in arrays
    ]
    path.write_text(json.dumps({"data": data}))
    return str(path)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _c_api_environment() -> dict[str, str]:
    """The server's environment (its libraries, the python stubs' interpreter): in C API mode
    perf_analyzer is the server's process."""
    from triton_kit.server.binary import find_installation, server_environment

    return server_environment(find_installation())


class BusyCores:
    """Cores kept busy from now to :meth:`read`: this process's waited-for children (the
    perf_analyzer just run) and, given its pid, the running server (all its threads; Linux's
    /proc, as on the lent GPU machine, whose packages may lack psutil)."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.started = time.perf_counter()
        self.children = _children_cpu_s()
        self.server_s = _process_cpu_s(server_pid)

    def read(self) -> dict[str, float]:
        wall = time.perf_counter() - self.started
        busy = {"client_cores": round((_children_cpu_s() - self.children) / wall, 2)}
        if self.server_pid is not None:
            server_s = _process_cpu_s(self.server_pid) - self.server_s
            busy["server_cores"] = round(server_s / wall, 2)
        return busy


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_s(pid: int | None) -> float:
    """utime + stime of ``pid`` (fields 14 and 15 of /proc/PID/stat); 0 for None."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pinned(cpus: str | None) -> list[str]:
    """The prefix that keeps a command on ``cpus`` (taskset's list syntax); none for None."""
    return ["taskset", "-c", cpus] if cpus else []


def run(
    url: str,
    model: str,
    concurrency: int,
    seconds: float,
    out: Path,
    input_data: str = "random",
    stability: int = 20,
    shared_memory: str = "none",
    output_bytes: int = 0,
    cpus: str | None = None,
    asynchronous: bool = False,
    c_api: CApi | None = None,
    server_pid: int | None = None,
    protocol: str = "grpc",
) -> dict:
    """One perf_analyzer measurement at batch 1: rate, p50/p95/p99 (ms) and Triton's split.

    ``url`` is host:port of the ``protocol``'s :func:`endpoint` (:data:`PROTOCOLS`: "grpc",
    "http", or "grpc-stream", gRPC with every request on one bidirectional stream,
    perf_analyzer's ``--streaming``: a lone request's latency is mostly the protocol's, so the
    batch-1 rows measure each); ``input_data`` "random" or a JSON file (:func:`text_inputs`;
    text models need real text). Windows of ``seconds`` until throughput and p99 agree within
    ``stability`` % (at most 8; on a shared host, 20 % may never be reached). Returns
    {"skipped"} without a binary and {"error"} when it fails. ``shared_memory`` "system" or
    "cuda" sends the inputs (and receives outputs of ``output_bytes`` each) through Triton's
    shared-memory regions instead of inside the request messages. ``cpus`` (taskset's list, e.g.
    "12-15") keeps perf_analyzer on those cores, away from the server's. ``asynchronous`` keeps
    the concurrency's requests in flight from perf_analyzer's few async threads (``--async``)
    instead of a blocking thread each. On the H100 (issue 30's goals, session 42) async lost at
    ResNet-50 c256 (0.81-0.83x against 0.87-0.92x) and won a little at BERT-large c64
    (0.94-0.96x against 0.92-0.95x). ``c_api``: Triton in perf_analyzer's own process instead of
    the server at ``url`` (sync, inline inputs only). The row's ``cpu`` gives the cores
    perf_analyzer kept busy over its run (its CPU time over the run's wall time), and the
    server's where ``server_pid`` is given: a side near its cores' count is what caps the load,
    not the GPU. Its ``server`` split adds ``rows_per_execution`` (:func:`rows_per_execution`)
    where perf_analyzer printed the counts.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: choose from {PROTOCOLS}")
    if c_api is not None and (shared_memory != "none" or asynchronous or protocol != "grpc"):
        raise ValueError("perf_analyzer's C API mode takes sync requests with inline inputs "
                         "only, and no protocol")  # fmt: skip
    executable = binary()
    if not executable:
        return {"skipped": "perf_analyzer not installed (scripts/install-perf-analyzer.sh)"}
    tag = ("" if shared_memory == "none" else f"-{shared_memory}-shm") + "-async" * asynchronous
    tag += "-capi" if c_api else ""
    tag += "" if protocol == "grpc" else f"-{protocol}"
    csv_path = out / f"perf_analyzer-{model}-c{concurrency}{tag}.csv"
    streaming = ["--streaming"] if protocol == "grpc-stream" else []
    service = [
        "-u", url.removeprefix("grpc://"), "-i", endpoint(protocol), *streaming,
    ] if c_api is None else [
        "--service-kind=triton_c_api", f"--triton-server-directory={c_api.server_dir}",
        f"--model-repository={c_api.repository}",
    ]  # fmt: skip
    command = [
        *pinned(cpus), executable, "-m", model, *service, "-b", "1",
        "--concurrency-range", str(concurrency), "--input-data", input_data,
        "--measurement-interval", str(int(seconds * 1000)), "--percentile", "99",
        "--stability-percentage", str(stability), "--max-trials", "8", "-f", str(csv_path),
    ]  # fmt: skip
    if asynchronous:
        command.append("--async")
    if shared_memory != "none":
        command += [
            f"--shared-memory={shared_memory}",
            f"--output-shared-memory-size={output_bytes}",
        ]
    clock = BusyCores(server_pid)
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 20 + 60,
                          env=_c_api_environment() if c_api else None)  # fmt: skip
    if done.returncode != 0 or not csv_path.exists():
        return {"error": (done.stdout + done.stderr)[-2000:]}
    row = next(csv.DictReader(csv_path.open()))
    us = {key: float(value) for key, value in row.items() if key and value}
    batch = rows_per_execution(done.stdout)
    return {
        "cpu": clock.read(),
        "items_per_s": us["Inferences/Second"],
        "p50": us["p50 latency"] / 1e3,
        "p95": us["p95 latency"] / 1e3,
        "p99": us["p99 latency"] / 1e3,
        "server": {
            "queue_ms": us["Server Queue"] / 1e3,
            "compute_input_ms": us["Server Compute Input"] / 1e3,
            "compute_infer_ms": us["Server Compute Infer"] / 1e3,
            "compute_output_ms": us["Server Compute Output"] / 1e3,
            **({"rows_per_execution": batch} if batch else {}),
        },
    }


def rows_per_execution(stdout: str) -> float | None:
    """The rows each execution carried over the measured windows: the model's inference count
    over its execution count, from the "Server:" block perf_analyzer prints (the first: an
    ensemble's composing models follow it). Little's law only estimates it."""
    found = SERVER_COUNTS.search(stdout)
    if not found or not int(found[2]):
        return None
    return int(found[1]) / int(found[2])
