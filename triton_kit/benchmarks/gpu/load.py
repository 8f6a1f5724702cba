"""Timing loops: in-process (eager and CUDA graph) and served (gRPC, client processes).

A served load sends ``requests`` (a list of input dicts, rotated per call so mixed text
lengths really mix) from ``concurrency`` asyncio users spread over client processes, with
inputs inline or through system or CUDA shared memory (one region per user, written
before every call, as a client with new data would).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from dataclasses import dataclass, field

import numpy as np

from triton_kit.benchmarks.gpu.models import Spec, example
from triton_kit.benchmarks.gpu.settings import Settings


def stats(latencies_s: list[float]) -> dict[str, float]:
    ms = np.asarray(latencies_s or [float("nan")]) * 1e3
    return {f"p{q}": float(np.percentile(ms, q)) for q in (50, 95, 99)}


def timed_loop(fn, seconds: float, limit: int = 20000) -> list[float]:
    fn()
    lat: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and len(lat) < limit:
        start = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - start)
    return lat


# -- in-process --------------------------------------------------------------------------


def in_process(module, spec: Spec, batches: tuple[int, ...], settings: Settings) -> dict:
    """Eager (and on the GPU CUDA-graph) timings, host input and output copies included."""
    import torch

    torch.backends.cudnn.benchmark = False
    rng = np.random.default_rng(0)
    results = {}
    for batch in batches:
        host = {n: torch.from_numpy(a) for n, a in example(spec, batch, rng).items()}
        if settings.gpu:
            host = {n: t.pin_memory() for n, t in host.items()}
        fns = {"eager": _eager(module, host, settings.device)}
        if settings.gpu:
            fns["graph"] = _graphed(module, host)
        for label, fn in fns.items():
            lat = timed_loop(fn, settings.seconds)
            results[f"{label}_bs{batch}"] = {
                **stats(lat),
                "items_per_s": batch * len(lat) / sum(lat),
            }
    return results


def _eager(module, host, device: str):
    import torch

    def run():
        with torch.inference_mode():
            inputs = [t.to(device, non_blocking=True) for t in host.values()]
            return module(*inputs).cpu()

    return run


def _graphed(module, host):
    import torch

    static = {n: t.cuda() for n, t in host.items()}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.inference_mode():
        for _ in range(3):
            module(*static.values())
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.inference_mode():
        out = module(*static.values())

    def run():
        for n, t in host.items():
            static[n].copy_(t, non_blocking=True)
        graph.replay()
        return out.cpu()

    return run


# -- served ------------------------------------------------------------------------------


WORKER_GRACE_S = 180.0  # spawn + imports + region setup on a loaded machine


@dataclass(frozen=True)
class Load:
    """What every served call sends and checks."""

    model: str
    requests: list[dict[str, np.ndarray]]  # rotated per call
    output: str
    output_rows: int = 1
    shm: str | None = None  # None, "system" or "cuda"
    api_key: str = ""  # the server's restricted-API key (shared-memory registration)
    headers: dict[str, str] = field(default_factory=dict)


def spec_load(spec: Spec, batch: int, model: str | None = None) -> Load:
    inputs = [example(spec, batch, np.random.default_rng(1))]
    return Load(model or spec.name, inputs, spec.output[0], batch)


def served_load(url: str, load: Load, concurrency: int, settings: Settings) -> dict:
    processes = max(1, min(settings.processes, concurrency))
    share = [concurrency // processes + (i < concurrency % processes) for i in range(processes)]
    ctx = mp.get_context("spawn")
    tasks = [(url, load, c, settings.seconds, i, settings.warmup) for i, c in enumerate(share)]
    with ctx.Pool(processes) as pool:  # leaving the block terminates the workers
        # A worker that dies mid-task never delivers its result and a plain map() waits
        # forever (seen once under heavy load in the CPU smoke run): bound the wait.
        try:
            parts = pool.map_async(_worker, tasks).get(
                timeout=WORKER_GRACE_S + 2 * settings.seconds
            )
        except mp.TimeoutError as exc:
            raise RuntimeError(
                f"load workers gave no result within {WORKER_GRACE_S + 2 * settings.seconds:.0f} s "
                "(a worker process died?)"
            ) from exc
    latencies = [x for _, lat, _ in parts for x in lat]
    errors = sum(e for e, _, _ in parts)
    first_error = next((m for _, _, m in parts if m), "")
    rows = load.output_rows
    return {
        **stats(latencies),
        "items_per_s": rows * len(latencies) / settings.seconds,
        "requests": len(latencies),
        "errors": errors,
        "first_error": first_error[:300],
        "concurrency": concurrency,
        "shm": load.shm or "none",
    }


def served_sequential(url: str, load: Load, settings: Settings, count: int = 300) -> dict:
    """One call at a time from this process: batch-1 latency."""
    args = (url, load, 1, settings.seconds, 0, settings.warmup)
    errors, lat, first_error = _worker(args, limit=count)
    return {
        **stats(lat),
        "items_per_s": load.output_rows * len(lat) / sum(lat) if lat else 0.0,
        "requests": len(lat),
        "errors": errors,
        "first_error": first_error[:300],
        "shm": load.shm or "none",
    }


def _worker(args, limit: int | None = None) -> tuple[int, list[float], str]:
    """Never raises: an exception sent back through the pool may not unpickle (tritonclient's
    do not), and that kills the pool's result thread, so served_load would wait it out."""
    url, load, concurrency, seconds, index, warmup = args
    try:
        return asyncio.run(_worker_async(url, load, concurrency, seconds, index, limit, warmup))
    except Exception as exc:
        return concurrency, [], f"{type(exc).__name__}: {exc}"


async def _worker_async(url, load: Load, concurrency, seconds, index, limit, warmup=0.0):
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(url)
    latencies: list[float] = []
    errors = 0
    first_error = ""
    measured_from = time.perf_counter() + warmup  # calls started before are not timed
    end = measured_from + seconds

    async def user(number: int) -> None:
        nonlocal errors, first_error
        try:
            regions = await _Regions.open(client, load, f"bench_{index}_{number}")
        except Exception as exc:
            errors += 1
            first_error = first_error or f"registering shared memory: {type(exc).__name__}: {exc}"
            return
        try:
            call = 0
            while time.perf_counter() < end and (limit is None or len(latencies) < limit):
                arrays = load.requests[(number + call) % len(load.requests)]
                call += 1
                start = time.perf_counter()
                try:
                    inputs = regions.inputs(grpcclient, arrays)
                    outputs = [grpcclient.InferRequestedOutput(load.output)]
                    result = await client.infer(load.model, inputs, outputs=outputs)
                    assert result.as_numpy(load.output).shape[0] == load.output_rows
                    if start >= measured_from:
                        latencies.append(time.perf_counter() - start)
                except Exception as exc:
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
        finally:
            try:
                await regions.close()
            except Exception as exc:
                errors += 1
                first_error = first_error or f"releasing shared memory: {type(exc).__name__}: {exc}"

    await asyncio.gather(*(user(n) for n in range(concurrency)))
    await client.close()
    return errors, latencies, first_error


class _Regions:
    """One shared-memory region per input for one user (none when ``load.shm`` is None)."""

    def __init__(self, client, load: Load, prefix: str) -> None:
        self.client, self.load, self.prefix = client, load, prefix
        self.handles: dict[str, tuple[str, object, int]] = {}
        self.module = None
        self.headers = {}
        if load.api_key:
            from triton_kit.server.security import api_key_headers

            self.headers = api_key_headers(load.api_key, "grpc")

    @classmethod
    async def open(cls, client, load: Load, prefix: str) -> _Regions:
        regions = cls(client, load, prefix)
        if load.shm:
            await regions._register()
        return regions

    async def _register(self) -> None:
        if self.load.shm == "system":
            import tritonclient.utils.shared_memory as module
        else:
            import tritonclient.utils.cuda_shared_memory as module
        self.module = module
        sizes: dict[str, int] = {}
        for arrays in self.load.requests:
            for name, array in arrays.items():
                sizes[name] = max(sizes.get(name, 0), _nbytes(array))
        for name, size in sizes.items():
            region = f"{self.prefix}_{name}"
            if self.load.shm == "system":
                handle = module.create_shared_memory_region(region, f"/{region}", size)
                await self.client.register_system_shared_memory(
                    region, f"/{region}", size, headers=self.headers
                )
            else:
                handle = module.create_shared_memory_region(region, size, 0)
                await self.client.register_cuda_shared_memory(
                    region, module.get_raw_handle(handle), 0, size, headers=self.headers
                )
            self.handles[name] = (region, handle, size)

    def inputs(self, grpcclient, arrays: dict[str, np.ndarray]) -> list:
        from tritonclient.utils import np_to_triton_dtype

        tensors = []
        for name, array in arrays.items():
            tensor = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            if name in self.handles:
                region, handle, _ = self.handles[name]
                self.module.set_shared_memory_region(handle, [array])
                tensor.set_shared_memory(region, _nbytes(array))
            else:
                tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        return tensors

    async def close(self) -> None:
        """Unregister (waiting out Triton's "in use" right after a call), then destroy."""
        from triton_kit.client.shm import unregister_waiting_async

        if not self.handles:
            return
        unregister = getattr(self.client, f"unregister_{self.load.shm}_shared_memory")
        for region, handle, _ in self.handles.values():
            try:
                failure = await unregister_waiting_async(unregister, region, headers=self.headers)
                if failure is not None:
                    raise failure
            finally:
                self.module.destroy_shared_memory_region(handle)


def _nbytes(array: np.ndarray) -> int:
    if array.dtype == np.object_:
        from tritonclient.utils import serialize_byte_tensor

        return len(serialize_byte_tensor(array).item())
    return int(array.nbytes)
