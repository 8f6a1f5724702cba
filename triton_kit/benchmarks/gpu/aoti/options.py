"""The AOTInductor engine on the GPU: built, checked, timed in process and served natively.

This module is that benchmark's command line (the line above is ``--help``'s description),
parsed once into frozen :class:`Options`; the package's docstring says what each option does
to the run.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks.gpu.aoti.family import FAMILIES, Family, families
from triton_kit.benchmarks.gpu.settings import Settings
from triton_kit.benchmarks.harness.perf_analyzer import PROTOCOLS
from triton_kit.build_engines.engines.aoti.config import FINE_GRAPHS_UP_TO, graph_batch_sizes

SHARED_MEMORY = ("none", "system", "cuda")
CLIENTS = ("sync", "async")  # perf_analyzer: a blocking thread per request, or --async
WARMUPS = ("none", "all")  # none: Triton's default; all: model_warmup at every batch size


@dataclass(frozen=True)
class Options:
    out: Path
    backend_lib: Path | None
    seconds: float
    cxx: str | None  # Inductor's C++ compiler; None: its own choice ($CXX, else g++)
    instances: tuple[int, ...]
    smoke: bool = False  # CPU, tiny model, 2 clients: checks the code where there is no GPU
    shared_memory: tuple[str, ...] = SHARED_MEMORY  # how perf_analyzer sends the inputs
    delays_us: tuple[int, ...] = (2000,)  # queue delays of the batched package rows
    baseline: bool = True  # TorchScript through Triton's r24.10 pytorch backend (ResNet only)
    family: str = "resnet50"
    # Triton's pinned and CUDA memory pools (MiB) of the batched rows' servers; 0: Triton's
    # defaults (256 MiB pinned, 64 MiB CUDA), which a c256 batch of 150 KB images (38 MB) per
    # instance outgrows, so each gather may fall back to allocating.
    pools_mb: tuple[int, ...] = (0,)
    # Cores (taskset lists) for the servers and for perf_analyzer: apart, the client's 256
    # connections cannot take the server's cores (the served figure swung 0.42-0.88x between
    # runs while in process held steady). None: anywhere.
    server_cpus: str | None = None
    client_cpus: str | None = None
    repeats: int = 1  # each batched load measured this many times, to see the spread
    warmups: tuple[str, ...] = ("none",)  # each batched row served once per WARMUPS mode
    first_calls: bool = False  # time each batch size's first and second call in a new thread
    gathers: tuple[int, ...] = (0,)  # each batched row once per gather-kernel threshold (0: off)
    graphs: tuple[bool, ...] = (False,)  # each package row without and/or with CUDA graphs
    preferred: tuple[bool, ...] = (True,)  # each batched row with and/or without preferred sizes
    clients: tuple[str, ...] = ("sync",)  # each batched load from each CLIENTS mode
    fine_graphs_up_to: int = FINE_GRAPHS_UP_TO  # graph sizes an eighth apart up to here
    c_api: bool = False  # the batch-1 rows at c1 through perf_analyzer's C API too (no gRPC)
    c1_shared_memory: tuple[str, ...] = SHARED_MEMORY  # the batch-1 rows' ways (cuda: GPU only)
    # Where the package is kept: an earlier run's build there is reused (None: a fresh folder).
    package_dir: Path | None = None
    build_only: bool = False  # stop after the build (packages built side by side, then measured)
    # The batch-1 model behind the dynamic batcher (no delay) and/or without it (``_direct``).
    c1_batcher: tuple[bool, ...] = (True,)
    # The batch-1 models without and/or with CUDA graphs; None: as ``graphs``.
    c1_cuda_graphs: tuple[bool, ...] | None = None
    # Each batch-1 load over each (perf_analyzer.PROTOCOLS; keys ``_http``, ``_stream``).
    c1_protocols: tuple[str, ...] = ("grpc",)

    @property
    def c1_graphs(self) -> tuple[bool, ...]:
        return self.graphs if self.c1_cuda_graphs is None else self.c1_cuda_graphs

    @property
    def graphed_anywhere(self) -> bool:
        """Some served model replays CUDA graphs: in process, each batch is timed from a graph
        too, and the run records the graph sizes."""
        return any(self.graphs) or any(self.c1_graphs)

    @property
    def settings(self) -> Settings:
        device = "cpu" if self.smoke else "cuda"
        return Settings(out=self.out, device=device, seconds=self.seconds, smoke=self.smoke)

    @property
    def spec(self) -> Family:
        return families(self.smoke)[self.family]

    @property
    def graph_sizes(self) -> tuple[int, ...]:
        """The graphed rows' sizes, as ``build_engines --engine aoti --cuda-graphs`` writes them
        for ``fine_graphs_up_to`` (:func:`graph_batch_sizes`)."""
        return graph_batch_sizes(self.spec.max_batch, self.fine_graphs_up_to)

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency(self.spec.concurrency)

    @property
    def with_baseline(self) -> bool:
        return self.baseline and self.spec.baseline


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.gpu.aoti", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--family", choices=FAMILIES, default="resnet50",
        help="resnet50 (default; report aoti.json), bert-base or bert-large (seq 128, batch up "
        "to 64, loads at c64; report aoti-<family>.json)",
    )  # fmt: skip
    parser.add_argument(
        "--backend-lib",
        type=Path,
        default=os.environ.get("TRITON_KIT_AOTI_BACKEND"),
        help="the pytorch backend r26.03 or newer (default: $TRITON_KIT_AOTI_BACKEND, which "
        "scripts/gpu/bench.sh sets when it built one)",
    )
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument(
        "--cxx", default=os.environ.get("TRITON_KIT_AOTI_CXX"),
        help="C++ compiler for the package (default: Inductor's own, $CXX or g++)",
    )  # fmt: skip
    parser.add_argument("--instances", default="1,2,4")
    parser.add_argument(
        "--delays", default="2000",
        help="queue delays (us) of the batched package rows, each at every instance count",
    )  # fmt: skip
    parser.add_argument(
        "--no-baseline", dest="baseline", action="store_false",
        help="leave out the TorchScript row (needs Triton's r24.10 pytorch backend; ResNet "
        "only: BERT families have none)",
    )  # fmt: skip
    parser.add_argument(
        "--shared-memory", default=",".join(SHARED_MEMORY),
        help="how the batched loads (c256, BERT c64) send their inputs: inside the gRPC "
        "message (none), through system or CUDA shared memory (default: all three)",
    )  # fmt: skip
    parser.add_argument(
        "--pools-mb", default="0",
        help="Triton's pinned and CUDA memory pool sizes (MiB), each a server of its own for "
        "every batched row; 0: Triton's defaults (default: 0 only)",
    )  # fmt: skip
    parser.add_argument("--server-cpus", help="taskset core list for each tritonserver")
    parser.add_argument("--client-cpus", help="taskset core list for perf_analyzer")
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="measure each batched load this many times in a row (keys _rep2.. after the "
        "first), to see the spread within one run (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", default="none",
        help="each batched row once per mode: none (Triton's default) and/or all (model_warmup "
        "at every batch size 1..max on each instance; rows ..._warm); default none",
    )  # fmt: skip
    parser.add_argument(
        "--first-calls", action="store_true",
        help="time the package's first and second call at every batch size in a fresh thread "
        "(cuDNN plans are built per thread and shape)",
    )  # fmt: skip
    parser.add_argument(
        "--gather", default="0",
        help="gather-kernel thresholds: each batched row once per value (rows ..._gN for N > 0; "
        "the backend gathers the GPU-resident inputs of N or more requests with one kernel); "
        "default 0 only (a copy per request)",
    )  # fmt: skip
    parser.add_argument(
        "--cuda-graphs", default="off",
        help="off and/or on: each package row without / with CUDA graphs (rows ..._cg; "
        "optimization.cuda.graphs), and in process each batch replayed from a graph too "
        "(rows bs<N>_graph); default off",
    )  # fmt: skip
    parser.add_argument(
        "--preferred", default="on",
        help="on and/or off: each batched row with the family's preferred batch sizes (rows "
        "..._d<N>p) and/or without (rows ..._d<N>: a batch goes when an instance is free or the "
        "delay ends); default on",
    )  # fmt: skip
    parser.add_argument(
        "--client", default="sync",
        help="sync and/or async: perf_analyzer's batched loads from a blocking thread per "
        "request and/or from its async threads (loads ..._async); c1 is always sync; default "
        "sync",
    )  # fmt: skip
    parser.add_argument(
        "--fine-graphs-up-to", type=int, default=FINE_GRAPHS_UP_TO,
        help="the graphed rows' sizes are at most an eighth apart up to this many rows and "
        f"powers of two above (default {FINE_GRAPHS_UP_TO}, as the build writes them)",
    )  # fmt: skip
    parser.add_argument(
        "--c-api", action="store_true",
        help="also measure the batch-1 models at c1 with Triton inside perf_analyzer's own "
        "process (its C API; loads ..._c1_capi): the served c1 latency less gRPC",
    )  # fmt: skip
    parser.add_argument(
        "--c1-shared-memory", default=",".join(SHARED_MEMORY),
        help="how the batch-1 models' c1 loads send their inputs, each a stability-checked "
        "load of its own: none, system and/or cuda (default: all three; cuda only on a GPU)",
    )  # fmt: skip
    parser.add_argument(
        "--c1-protocols", default="grpc",
        help="grpc, http and/or grpc-stream (every request on one gRPC stream, perf_analyzer's "
        "--streaming): the batch-1 models' c1 loads over each (loads ..._http, ..._stream); a "
        "lone request's served latency is mostly the protocol's: on the H200 HTTP's and the "
        "stream's read 0.07-0.10 ms below unary gRPC's (benchmarks/results/gpu.md); default grpc",
    )  # fmt: skip
    parser.add_argument(
        "--c1-batcher", default="on",
        help="on and/or off: the batch-1 model behind Triton's dynamic batcher with no delay "
        "and/or with no dynamic_batching at all (rows ..._d0_direct): then Triton's default "
        "scheduler hands each request to the instance itself, without the batcher thread's "
        "wake-up between them (core r24.10, DynamicBatchScheduler::Enqueue); default on",
    )  # fmt: skip
    parser.add_argument(
        "--c1-cuda-graphs",
        help="off and/or on: the batch-1 models without / with CUDA graphs (default: as "
        "--cuda-graphs); e.g. on alone where a lone request without graphs is not worth its "
        "two stability-checked loads",
    )  # fmt: skip
    parser.add_argument(
        "--package-dir", type=Path,
        help="keep the package (<prefix>.pt2, its eager outputs and its build record) in this "
        "folder, and reuse one an earlier run of the same family built there instead of "
        "building again (default: a fresh temporary folder)",
    )  # fmt: skip
    parser.add_argument(
        "--build-only", action="store_true",
        help="stop after the build (with --package-dir: scripts/gpu/goals.sh builds a call's "
        "packages side by side, each in a minute or two, before any step measures)",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model: checks the code")
    args = parser.parse_args(argv)
    instances = tuple(int(n) for n in args.instances.split(","))
    shm = tuple(args.shared_memory.split(","))
    unknown = set(shm) - set(SHARED_MEMORY)
    if unknown:
        parser.error(f"--shared-memory: unknown {sorted(unknown)}; choose from {SHARED_MEMORY}")
    delays = tuple(int(n) for n in args.delays.split(","))
    if min(delays) <= 0:
        parser.error("--delays: each must be above 0 (the no-delay row is always measured)")
    pools = tuple(int(n) for n in args.pools_mb.split(","))
    if min(pools) < 0:
        parser.error("--pools-mb: each must be 0 (Triton's defaults) or more")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    warmups = tuple(args.warmup.split(","))
    if set(warmups) - set(WARMUPS):
        parser.error(f"--warmup: unknown {sorted(set(warmups) - set(WARMUPS))}; "
                     f"choose from {WARMUPS}")  # fmt: skip
    gathers = tuple(int(n) for n in args.gather.split(","))
    if min(gathers) < 0:
        parser.error("--gather: each must be 0 (a copy per request) or more")
    graphs = _on_off(parser, "--cuda-graphs", args.cuda_graphs)
    preferred = _on_off(parser, "--preferred", args.preferred)
    c1_batcher = _on_off(parser, "--c1-batcher", args.c1_batcher)
    c1_graphs = _on_off(parser, "--c1-cuda-graphs", args.c1_cuda_graphs) \
        if args.c1_cuda_graphs else None  # fmt: skip
    clients = tuple(dict.fromkeys(args.client.split(",")))
    if set(clients) - set(CLIENTS):
        parser.error(f"--client: unknown {sorted(set(clients) - set(CLIENTS))}; "
                     f"choose from {CLIENTS}")  # fmt: skip
    c1_shm = tuple(dict.fromkeys(args.c1_shared_memory.split(",")))
    if set(c1_shm) - set(SHARED_MEMORY):
        parser.error(f"--c1-shared-memory: unknown {sorted(set(c1_shm) - set(SHARED_MEMORY))}; "
                     f"choose from {SHARED_MEMORY}")  # fmt: skip
    if args.smoke and c1_shm == ("cuda",):
        parser.error("--c1-shared-memory cuda needs a GPU; --smoke runs on CPU")
    c1_protocols = tuple(dict.fromkeys(args.c1_protocols.split(",")))
    if set(c1_protocols) - set(PROTOCOLS):
        parser.error(f"--c1-protocols: unknown {sorted(set(c1_protocols) - set(PROTOCOLS))}; "
                     f"choose from {PROTOCOLS}")  # fmt: skip
    if args.fine_graphs_up_to < 1:
        parser.error("--fine-graphs-up-to must be at least 1")
    if args.build_only and args.package_dir is None:
        parser.error("--build-only needs --package-dir: the package would go with its folder")
    return Options(args.out, args.backend_lib, args.seconds, args.cxx, instances, args.smoke,
                   shm, delays, args.baseline, args.family, pools, args.server_cpus,
                   args.client_cpus, args.repeats, warmups, args.first_calls,
                   gathers, graphs, preferred, clients, args.fine_graphs_up_to,
                   args.c_api, c1_shm, args.package_dir, args.build_only,
                   c1_batcher, c1_graphs, c1_protocols)  # fmt: skip


def _on_off(parser: argparse.ArgumentParser, flag: str, value: str) -> tuple[bool, ...]:
    """``off,on`` -> ``(False, True)``, in the order given, each once."""
    words = tuple(dict.fromkeys(value.split(",")))
    if set(words) - {"off", "on"}:
        parser.error(f"{flag}: unknown {sorted(set(words) - {'off', 'on'})}; choose from off, on")
    return tuple(word == "on" for word in words)
