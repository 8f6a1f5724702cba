"""How much memory CUDA graphs of an AOTInductor package hold when they share one pool (issue 30).

The kit's pytorch_aoti build captures a graph per batch size into one pool per instance. With
ResNet-50's 48 sizes, four instances ran the H100 out of memory with 50 GiB in private pools,
largest first or smallest first (goals calls B and E). This captures a small CNN at the same
sizes into one shared pool, as the eager module and as its AOTInductor package (loaded
run_single_threaded, as the backend loads it), in both orders, and prints what the pool holds
after each capture: if the package's graphs do not reuse each other's freed blocks as the
module's do, the pool grows with the sum of the sizes instead of the largest.

    CXX=/usr/bin/g++ python3 scripts/gpu/diagnostics/graph_pool.py OUT.json

On the H100 (issue 30, session 41: gpu/issue30-goals/session41/graph_pool.json), captured on
one stream as torch.cuda.graph does, the package's graphs shared the pool as the module's did:
what stayed allocated grew only by the static inputs (39 -> 108 MiB for the package, largest
first), and the process reserved 3.5 GiB largest first against 13.1 GiB smallest first (the
module's peak at batch 256: 2.1 GiB). The backend took a new stream from the pool for each
capture, and the caching allocator reuses a freed block only on its own stream: the likely
cause of its out-of-memory, fixed in scripts/gpu/pytorch_aoti/cuda_graphs.hh (not yet measured).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from triton_kit.build_engines.engines.aoti.config import graph_batch_sizes

MIB = 1 << 20


def network() -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    channels = 3
    for width in (64, 128, 256, 256):
        layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.ReLU()]
        channels = width
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, 10)]
    return torch.nn.Sequential(*layers).cuda().half().eval()


def package(module: torch.nn.Module, largest: int) -> object:
    batch = torch.export.Dim("batch", min=1, max=largest)
    example = torch.zeros(4, 3, 64, 64, device="cuda", dtype=torch.half)
    exported = torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
    path = Path(tempfile.mkdtemp()) / "net.pt2"
    torch._inductor.aoti_compile_and_package(exported, package_path=str(path))
    return torch._inductor.aoti_load_package(str(path), run_single_threaded=True)


def capture(forward, sizes: list[int]) -> dict:
    """Every size into one pool, in the order given; what the pool holds after each."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    pool = torch.cuda.graph_pool_handle()
    held, growth = [], []
    side = torch.cuda.Stream()
    for size in sizes:
        x = torch.zeros(size, 3, 64, 64, device="cuda", dtype=torch.half)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            forward(x)  # warm-up outside the graph, as the backend does
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, capture_error_mode="relaxed"):
            out = forward(x)
        held.append((graph, x, out))
        growth.append(round((torch.cuda.memory_allocated() - base) / MIB, 1))
    result = {"sizes": sizes, "allocated_mib": growth,
              "reserved_mib": round(torch.cuda.memory_reserved() / MIB, 1)}  # fmt: skip
    del held
    return result


def main(out: Path) -> None:
    largest = 256
    sizes = list(graph_batch_sizes(largest))
    module = network()
    started = time.perf_counter()
    runner = package(module, largest)
    found: dict = {"build_s": round(time.perf_counter() - started, 1)}

    def aoti(x: torch.Tensor) -> torch.Tensor:
        return runner(x)

    with torch.no_grad():
        one = torch.zeros(largest, 3, 64, 64, device="cuda", dtype=torch.half)
        torch.cuda.reset_peak_memory_stats()
        module(one)
        found["module_peak_at_largest_mib"] = round(torch.cuda.max_memory_allocated() / MIB, 1)
        del one
        for name, forward in (("module", module), ("aoti", aoti)):
            for order in ("largest_first", "smallest_first"):
                ordered = sorted(sizes, reverse=order == "largest_first")
                row = capture(forward, ordered)
                found[f"{name}_{order}"] = row
                print(name, order, "allocated MiB after each:", row["allocated_mib"], flush=True)
    out.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
