"""Step 2, ``in_process`` (and ``--first-calls``): the package loaded in this process, its
outputs checked against the eager module's, timed at each batch with host copies and, with
CUDA graphs, replayed from a graph; each batch size's first and second call in a fresh thread.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.aoti.family import Family
from triton_kit.benchmarks.gpu.load import stats, timed_loop
from triton_kit.benchmarks.gpu.settings import Settings


def check(runner, package: Path, spec: Family, device: str) -> dict:
    """The loaded package against the eager module's outputs on the build's inputs."""
    import torch

    ref = torch.load(str(package) + ".ref")
    with torch.inference_mode():
        y = runner(*(x.to(device) for x in ref["inputs"])).float().cpu()
    expected = ref["outputs"]
    return {"max_abs_diff": float((y - expected).abs().max()), **spec.agreement(y, expected)}


def in_process(package: Path, spec: Family, settings: Settings, graphs: bool = False) -> dict:
    """Each batch's forward with host copies; with ``graphs``, also replayed from a CUDA graph
    (``bs<N>_graph``) with its outputs checked against the plain forward's."""
    import torch

    runner = torch._inductor.aoti_load_package(str(package))
    # One single-threaded load serves every batch's graph (they are captured and replayed in turn).
    single = (torch._inductor.aoti_load_package(str(package), run_single_threaded=True)
              if graphs and settings.gpu else None)  # fmt: skip
    rows: dict = {"check": check(runner, package, spec, settings.device)}
    print("check", rows["check"], flush=True)
    rng = np.random.default_rng(0)
    for batch in spec.batches:
        hosts = [torch.from_numpy(a) for a in spec.example(rng, batch)]
        if settings.gpu:
            hosts = [h.pin_memory() for h in hosts]

        def run(hosts=hosts):
            with torch.inference_mode():
                return runner(*(h.to(settings.device, non_blocking=True) for h in hosts)).cpu()

        latencies = timed_loop(run, settings.seconds)
        rows[f"bs{batch}"] = {
            **stats(latencies),
            "items_per_s": batch * len(latencies) / sum(latencies),
        }
        print(batch, rows[f"bs{batch}"], flush=True)
        if single is not None:
            rows[f"bs{batch}_graph"] = graphed(single, hosts, run(), settings)
            print(f"{batch} graph", rows[f"bs{batch}_graph"], flush=True)
    return rows


def graphed(runner, hosts: list, plain, settings: Settings) -> dict:
    """The package's forward at one batch replayed from a CUDA graph, host copies included, as
    the backend's graphs run it: ``runner`` loaded ``run_single_threaded`` (its threaded run
    records an event a capture leaves unqueryable), one warm-up call on a side stream, then the
    capture."""
    import torch

    with torch.inference_mode():
        static = [h.to(settings.device) for h in hosts]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            runner(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="relaxed"):
            out = runner(*static)

    def run():
        with torch.inference_mode():
            for held, host in zip(static, hosts, strict=True):
                held.copy_(host, non_blocking=True)
            graph.replay()
            return out.cpu()

    replayed = run().float()
    latencies = timed_loop(run, settings.seconds)
    batch = hosts[0].shape[0]
    return {
        **stats(latencies),
        "items_per_s": batch * len(latencies) / sum(latencies),
        "max_abs_diff_vs_plain": float((replayed - plain.float()).abs().max()),
    }


def first_calls(package: Path, spec: Family, settings: Settings) -> dict:
    """Each batch size's first and second call (ms), ascending, in a thread of its own: the
    cost a Triton instance thread pays the first time it meets a batch size."""
    import threading

    import torch

    found: dict = {}

    def measure() -> None:
        runner = torch._inductor.aoti_load_package(str(package))
        rng = np.random.default_rng(0)
        full = [torch.from_numpy(a).to(settings.device)
                for a in spec.example(rng, spec.max_batch)]  # fmt: skip
        first, second = [], []
        with torch.inference_mode():
            for batch in range(1, spec.max_batch + 1):
                for sink in (first, second):
                    started = time.perf_counter()
                    runner(*(x[:batch] for x in full))
                    if settings.gpu:
                        torch.cuda.synchronize()
                    sink.append(round((time.perf_counter() - started) * 1e3, 3))
        excess = sorted(a - b for a, b in zip(first, second, strict=True))
        found.update(
            first_ms=first, second_ms=second, first_total_s=round(sum(first) / 1e3, 2),
            second_total_s=round(sum(second) / 1e3, 2),
            excess_p50_ms=round(excess[len(excess) // 2], 3), excess_max_ms=round(excess[-1], 3),
        )  # fmt: skip

    thread = threading.Thread(target=measure, name="first-calls")
    thread.start()
    thread.join()
    summary = {k: v for k, v in found.items() if not k.endswith("_ms") or "excess" in k}
    print("first_calls", summary, flush=True)
    return found
