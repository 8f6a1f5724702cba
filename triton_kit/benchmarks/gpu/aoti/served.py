"""Step 3, ``served``: each model of the repository on a bare ``tritonserver`` of its own, its
outputs checked, then perf_analyzer's loads, each row keyed by :func:`load_key` (what
``report.LOAD`` reads back); with ``--c-api``, the batch-1 model with Triton inside
perf_analyzer.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.aoti.family import Family
from triton_kit.benchmarks.gpu.aoti.options import Options
from triton_kit.benchmarks.gpu.aoti.repository import AOTI_BACKEND, BASELINE

Record = Callable[[str, object], None]  # a row as it is measured: Results.record's step bound

# A batch-1 load's client, each protocol's, as its key names it (load_key), and back.
CLIENT_OF = {"grpc": "sync", "http": "http", "grpc-stream": "stream"}
PROTOCOL_OF = {client: protocol for protocol, client in CLIENT_OF.items()}


def printed(key: str, value: object) -> None:
    print(key, value, flush=True)


def served(repo: Path, names: list[str], options: Options, reference: Path,
           record: Record = printed) -> dict:  # fmt: skip
    """Each model on a server of its own (a crash loses one row, and leaves its log): the
    package's outputs against ``reference``, then the batched loads, then c1 for the no-delay
    package and the TorchScript baseline; with ``--c-api``, the no-delay package at c1 once
    more inside perf_analyzer (:func:`c_api_row`), its own server stopped. Each row goes to
    ``record`` as it is measured, so a run stopped midway (a device call's deadline) keeps it."""
    from triton_kit.server.binary import assemble_backend_dir, find_installation

    installation = find_installation()
    backends = assemble_backend_dir(installation, Path(tempfile.mkdtemp(prefix="aoti-b-")) / "b")
    if options.backend_lib is not None:
        (backends / AOTI_BACKEND).mkdir(exist_ok=True)
        shutil.copy2(options.backend_lib, backends / AOTI_BACKEND / f"libtriton_{AOTI_BACKEND}.so")
    input_data = options.spec.input_data(options.out / f"{options.spec.prefix}-input-data.json")
    rows: dict = {}
    for name in names:
        alone = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        shutil.copytree(repo / name, alone / name)
        single = name == BASELINE
        checked = None if single else reference
        batched = not single and not batch_one_row(name)
        for pool in options.pools_mb if batched else (0,):
            rows.update(serve_one(alone, name, backends, options, single, checked, input_data,
                                  pool_mb=pool, record=record))  # fmt: skip
        if options.c_api and batch_one_row(name):
            rows.update(c_api_row(alone, name, backends, options, input_data, record))
    return rows


def c_api_row(repo: Path, name: str, backends: Path, options: Options, input_data: str,
              record: Record = printed) -> dict:  # fmt: skip
    """``name`` at c1 with Triton inside perf_analyzer's own process (``<name>_c1_capi``): the
    served c1 row less gRPC, so the batch-1 gap splits into Triton's part and the network's.
    perf_analyzer then holds the server as well, so it runs on the server's cores."""
    from triton_kit.benchmarks.harness.perf_analyzer import CApi, c_api_server_dir
    from triton_kit.benchmarks.launcher import measure

    server = c_api_server_dir(Path(tempfile.mkdtemp(prefix="capi-")), backends)
    key = load_key(name, 1, "none", "capi", 1)
    row = measure("", name, 1, options.seconds, options.out, input_data=input_data,
                  cpus=options.server_cpus, c_api=CApi(server, repo))  # fmt: skip
    record(key, row)
    return {key: row}


def planned_loads(name: str, options: Options, c1: bool) -> list[tuple[int, str, str]]:
    """(concurrency, shared memory, client) of each load ``name``'s server gets: a batch-1
    model at c1 each ``--c1-shared-memory`` way (CUDA's only on a GPU) over each
    ``--c1-protocols`` (client :data:`CLIENT_OF` the protocol), a batched one at the family's
    concurrency each way and client; ``c1`` adds a c1 load inline (the baseline)."""
    if batch_one_row(name):
        ways = [w for w in options.c1_shared_memory if options.settings.gpu or w != "cuda"]
        clients = [CLIENT_OF[protocol] for protocol in options.c1_protocols]
        loads = [(1, shm, client) for shm in ways for client in clients]
    else:
        loads = [(options.concurrency, shm, client)
                 for shm in options.shared_memory for client in options.clients]  # fmt: skip
    return [*loads, (1, "none", "sync")] if c1 else loads


def batch_one_row(name: str) -> bool:
    """The no-delay model (``..._d0``, with or without ``_direct`` and ``_cg``): measured at c1
    only."""
    return "d0" in name.split("_")


def repeated(loads: list[tuple[int, str, str]], repeats: int) -> list[tuple[int, str, str, int]]:
    """Each batched load (concurrency above 1) ``repeats`` times in a row, numbered from 1;
    the c1 loads once."""
    return [
        (concurrency, shm, client, repeat)
        for concurrency, shm, client in loads
        for repeat in range(1, (repeats if concurrency > 1 else 1) + 1)
    ]


def load_key(label: str, concurrency: int, shm: str, client: str, repeat: int) -> str:
    """``<label>_c<N>[_<shm>_shm][_async|_capi|_http|_stream][_rep<R>]``: report.LOAD reads it
    back (``client`` sync, async, capi: perf_analyzer's C API mode, http: sync over HTTP, or
    stream: sync on one gRPC stream)."""
    key = f"{label}_c{concurrency}" + ("" if shm == "none" else f"_{shm}_shm")
    key += "" if client == "sync" else f"_{client}"
    return key + (f"_rep{repeat}" if repeat > 1 else "")


def pool_flags(pool_mb: int) -> list[str]:
    """Triton's pinned and CUDA (device 0) memory pools at ``pool_mb`` MiB; none for 0."""
    if not pool_mb:
        return []
    size = pool_mb * 1024 * 1024
    return [f"--pinned-memory-pool-byte-size={size}", f"--cuda-memory-pool-byte-size=0:{size}"]


def served_outputs(url: str, name: str, spec: Family, reference: Path) -> dict:
    """The reference inputs as concurrent one-row requests, so the batcher puts several into
    one execution: each response must be its own row's outputs (the PT2 output path once gave
    every response the whole batch)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch
    import tritonclient.grpc as grpc

    ref = torch.load(str(reference))
    inputs, expected = [x.numpy() for x in ref["inputs"]], ref["outputs"].numpy()

    def one(row: int) -> np.ndarray:
        client = grpc.InferenceServerClient(url)
        tensors = []
        for i, ((dtype, _), array) in enumerate(zip(spec.inputs, inputs, strict=True)):
            tensors.append(grpc.InferInput(f"INPUT__{i}", [1, *array.shape[1:]], dtype))
            tensors[-1].set_data_from_numpy(array[row : row + 1])
        return client.infer(name, tensors, client_timeout=60).as_numpy("OUTPUT__0")

    with ThreadPoolExecutor(len(expected)) as pool:
        got = list(pool.map(one, range(len(expected))))
    shapes = sorted({tuple(y.shape) for y in got})
    if shapes != [(1, expected.shape[1])]:
        return {"shapes": [list(s) for s in shapes], "max_abs_diff": None}
    outputs = np.concatenate(got)
    return {
        "shapes": [list(s) for s in shapes],
        "max_abs_diff": float(np.abs(outputs - expected).max()),
        **spec.agreement(torch.from_numpy(outputs), torch.from_numpy(expected)),
    }


def serve_one(
    repo: Path,
    name: str,
    backends: Path,
    options: Options,
    c1: bool,
    reference: Path | None,
    input_data: str = "random",
    pool_mb: int = 0,
    record: Record = printed,
) -> dict:
    """One model on a bare server of its own; rows are keyed by ``name`` (``_pool<N>`` added
    where the memory pools are not Triton's defaults)."""
    from triton_kit.benchmarks.harness.perf_analyzer import endpoint, pinned
    from triton_kit.benchmarks.launcher import bare_command, measure, stop
    from triton_kit.server.binary import find_installation, server_environment
    from triton_kit.server.launcher import free_ports, wait_ready

    ports = free_ports(3)
    label = name + (f"_pool{pool_mb}" if pool_mb else "")
    log = options.out / f"server-{label}.log"
    started = time.perf_counter()
    with log.open("ab") as sink:
        server = [*bare_command(repo, backends, ports), *pool_flags(pool_mb)]
        process = subprocess.Popen([*pinned(options.server_cpus), *server],
                                   env=server_environment(find_installation()), stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    rows: dict = {}
    try:
        if not wait_ready(f"http://127.0.0.1:{ports[0]}", 600.0, process=process):
            record(f"{label}_error", f"server not ready; see {log.name}")
            return {f"{label}_error": f"server not ready; see {log.name}"}
        rows[f"{label}_load"] = {"seconds": round(time.perf_counter() - started, 1)}
        record(f"{label}_load", rows[f"{label}_load"])
        url = f"127.0.0.1:{ports[1]}"
        endpoints = {"grpc": url, "http": f"127.0.0.1:{ports[0]}"}
        if reference is not None:
            rows[f"{label}_outputs"] = served_outputs(url, name, options.spec, reference)
            record(f"{label}_outputs", rows[f"{label}_outputs"])
        loads = planned_loads(name, options, c1)
        data = "random" if name == BASELINE else input_data
        for concurrency, shm, client, repeat in repeated(loads, options.repeats):
            if process.poll() is not None:
                break
            key = load_key(label, concurrency, shm, client, repeat)
            protocol = PROTOCOL_OF.get(client, "grpc")
            rows[key] = measure(endpoints[endpoint(protocol)], name, concurrency, options.seconds,
                                options.out, shared_memory=shm,
                                output_bytes=options.spec.output_bytes, input_data=data,
                                cpus=options.client_cpus, asynchronous=client == "async",
                                server_pid=process.pid, protocol=protocol)  # fmt: skip
            record(key, rows[key])
        rows[f"{label}_server_alive"] = process.poll() is None
        record(f"{label}_server_alive", rows[f"{label}_server_alive"])
    finally:
        stop(process)
    return rows
