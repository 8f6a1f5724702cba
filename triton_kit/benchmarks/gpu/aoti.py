"""The AOTInductor engine on the GPU: built, checked, timed in process and served natively.

    python -m triton_kit.benchmarks.gpu.aoti --out OUT --backend-lib LIB [--family FAMILY]

Issue 30 asks for a compiled engine Triton serves without the python stub. Triton's
pytorch backend loads AOTInductor packages (``platform: "torch_aoti"``) from r26.03 on;
``LIB`` is that backend built on the GPU machine (``scripts/gpu/aoti_backend.sh``) and
served under its own name, ``pytorch_aoti`` (Triton 2.51 accepts any platform for a
backend it does not know, and the backend API is the same 1.19).

``--family`` picks the model (:data:`FAMILIES`): ``resnet50`` (default; UINT8 NHWC image,
1000 logits, batch up to 256, loads at c256, report ``aoti.json``, models ``aoti_*``) or
``bert-base``/``bert-large`` (input_ids and attention_mask INT64 [128], the mean-pooled
FP32 embedding, batch up to 64, loads at c64 of one sequence each, report
``aoti-bert-base.json``, models ``bert_base_aoti_*``; perf_analyzer sends token ids within
the vocabulary from an ``--input-data`` file, as random INT64 would index past the
embedding table). Each family writes its own report, so runs can share ``--out``.

Steps (the report is rewritten after each, so a run cut short keeps what it measured):

1. ``build``: the module (FP16; ResNet channels_last), ``torch.export`` with a dynamic batch
   (1..max batch; BERT's sequence fixed), ``aoti_compile_and_package``. Every compile and
   link command is logged, with the libraries the package's .so needs. ``--cxx`` picks
   Inductor's C++ compiler: on the H100 machine Inductor took ``/opt/gcc/bin/g++``, whose
   link put a static libstdc++ into the .so, and that copy's ``std::regex``
   (``parse_device_str``) crashed on the process's shared-libstdc++ locale (cuda-gdb
   backtrace, gpu_aoti.md).
2. ``in_process``: the package loaded by ``aoti_load_package``, its outputs checked against
   the eager module's on the build's inputs (max abs diff; ResNet top-1 agreement, BERT
   cosine similarity min), then timed at batch 1 and the larger batches (ResNet 64/256,
   BERT 64), host copies included.
3. ``served``: the package through ``pytorch_aoti`` at each ``--instances`` count and
   ``--delays`` queue delay (default 2000 us; preferred ResNet 64/128/256, BERT 16/32/64,
   or none: ``--preferred``) and at 1 instance with no delay (the batch-1 row), and, for
   ResNet, TorchScript through Triton's own pytorch backend (4 instances; ``--no-baseline``
   leaves it out, and the GPU run need not build that backend), each model on a bare
   ``tritonserver`` of its own so a crash loses one row and keeps its log. The package's
   served outputs are checked first (the check inputs as concurrent one-row requests,
   batched together); then one-row
   requests through perf_analyzer at the family's concurrency for each ``--shared-memory``
   way and ``--client`` mode (a blocking thread per request, or ``--async``); the no-delay
   package at c1 inline and through system and CUDA shared memory (shared memory saves the
   inputs' and outputs' trip through gRPC, the batch-1 gap's suspect); the baseline at c1
   inline.
   ``--warmup all`` serves each batched row a second time (``..._warm``) with Triton's
   ``model_warmup`` running every batch size 1..max on each instance before it is ready, and
   each server's load time is recorded (``<model>_load``). ``--gather 0,N`` serves each batched
   row once per threshold (``..._gN``): the config parameter ``GATHER_KERNEL_BUFFER_THRESHOLD``
   (the kit's build of the backend reads it) gathers the inputs of N or more requests already
   on the GPU (CUDA shared memory) with one kernel instead of a copy each. ``--cuda-graphs
   off,on`` serves each package row without and with Triton's ``optimization { cuda { graphs:
   true } }`` (``..._cg``; the kit's build of the backend captures a graph per batch size,
   scripts/gpu/pytorch_aoti/cuda_graphs.hh), and times in process the same package's forward
   replayed from a CUDA graph at each batch (``bs<N>_graph``), so a graphed row is compared with
   the engine's best either way. ``--c-api`` measures each no-delay package at c1 once more
   with Triton inside perf_analyzer (its C API, ``..._c1_capi``): the served c1 row less gRPC.

``--first-calls`` adds a step before ``served``: in a fresh thread, the package's first and
second call at every batch size 1..max. cuDNN's execution plans are cached per thread and per
shape (PyTorch's ``thread_local`` ``BenchmarkCache``), so a Triton instance thread pays a
convolution's plan building the first time the dynamic batcher hands it a batch size: the
suspect for the served rows' ~110 ms p99 stalls that faded over a run's later rows (call 22).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.load import stats, timed_loop
from triton_kit.benchmarks.gpu.models import bert, resnet50_uint8
from triton_kit.benchmarks.gpu.serving import Results
from triton_kit.benchmarks.gpu.settings import Settings
from triton_kit.build_engines.engines.aoti.config import (
    FINE_GRAPHS_UP_TO,
    capture_order,
    graph_batch_sizes,
)

AOTI_BACKEND = "pytorch_aoti"
SHARED_MEMORY = ("none", "system", "cuda")
CLIENTS = ("sync", "async")  # perf_analyzer: a blocking thread per request, or --async
WARMUPS = ("none", "all")  # none: Triton's default; all: model_warmup at every batch size
BERT_VOCAB = 30522  # BertConfig's default vocab_size, which models.bert keeps
BASELINE = "native_i4_d2000p"


@dataclass(frozen=True)
class Family:
    """One model as the benchmark builds, checks, serves and loads it."""

    prefix: str  # served model names (``<prefix>_i2_d2000p``), so the report's keys
    report: str  # the results file in --out
    make: Callable[[Settings], object]  # the eager module (on the CPU; moved by the caller)
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # INPUT__0..: Triton type, one item's dims
    example: Callable[[np.random.Generator, int], list[np.ndarray]]  # a batch of inputs
    output_dims: int  # OUTPUT__0: FP32 [output_dims] an item
    max_batch: int  # the export's dynamic batch and the config's max_batch_size
    preferred: tuple[int, ...]  # the batched rows' preferred batch sizes
    concurrency: int  # perf_analyzer's one-item clients on the batched rows
    batches: tuple[int, ...]  # in-process batch sizes
    agreement: Callable[[object, object], dict]  # outputs vs the eager module's, beside max diff
    channels_last: bool = False
    baseline: bool = False  # has a TorchScript row through Triton's r24.10 pytorch backend
    input_data: Callable[[Path], str] = lambda _: "random"  # perf_analyzer's --input-data

    @property
    def output_bytes(self) -> int:
        return self.output_dims * 4


def images(rng: np.random.Generator, batch: int) -> list[np.ndarray]:
    return [rng.integers(0, 256, (batch, 224, 224, 3), dtype=np.uint8)]


def sequences(seq: int, padded: bool = True) -> Callable[..., list[np.ndarray]]:
    """Token ids within the vocabulary and attention masks: the first row full, the others
    (when ``padded``) of random lengths from half the sequence up (padding is the mask path
    the batcher mixes)."""

    def make(rng: np.random.Generator, batch: int) -> list[np.ndarray]:
        ids = rng.integers(0, BERT_VOCAB, (batch, seq), dtype=np.int64)
        mask = np.ones((batch, seq), dtype=np.int64)
        if padded:
            for row, length in enumerate(rng.integers(seq // 2, seq + 1, batch)[1:], 1):
                mask[row, length:] = 0
        return [ids, mask]

    return make


def sequence_data(seq: int, requests: int = 16) -> Callable[[Path], str]:
    """perf_analyzer's ``--input-data`` file: ``requests`` sequences of valid ids, full masks."""
    from triton_kit.benchmarks.harness import perf_analyzer

    def write(path: Path) -> str:
        ids, mask = sequences(seq, padded=False)(np.random.default_rng(1), requests)
        rows = [{"INPUT__0": i, "INPUT__1": m} for i, m in zip(ids, mask, strict=True)]
        return perf_analyzer.tensor_inputs(path, rows)

    return write


def top1(y, expected) -> dict:
    return {"top1_agreement": float((y.argmax(1) == expected.argmax(1)).float().mean())}


def cosine(y, expected) -> dict:
    import torch

    similarity = torch.nn.functional.cosine_similarity(y.double(), expected.double(), dim=1)
    return {"cosine_min": float(similarity.min())}


def families(smoke: bool) -> dict[str, Family]:
    """Full size on the GPU; ``smoke``: BERT of one layer, 64 wide, 16 tokens (models.bert)."""
    seq = 16 if smoke else 128
    small = (1, 2) if smoke else None
    found = {
        "resnet50": Family(
            "aoti", "aoti.json", resnet50_uint8, (("UINT8", (224, 224, 3)),), images, 1000,
            256, (64, 128, 256), 256, small or (1, 64, 256), top1, channels_last=True,
            baseline=True,
        ),
    }  # fmt: skip
    for name, (layers, hidden, heads) in {"bert-base": (12, 768, 12),
                                          "bert-large": (24, 1024, 16)}.items():  # fmt: skip
        found[name] = Family(
            name.replace("-", "_") + "_aoti", f"aoti-{name}.json",
            lambda s, shape=(layers, hidden, heads): bert(s, *shape),
            (("INT64", (seq,)), ("INT64", (seq,))), sequences(seq), 64 if smoke else hidden,
            64, (16, 32, 64), 64, small or (1, 64), cosine, input_data=sequence_data(seq),
        )  # fmt: skip
    return found


FAMILIES = tuple(families(False))


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
    clients = tuple(dict.fromkeys(args.client.split(",")))
    if set(clients) - set(CLIENTS):
        parser.error(f"--client: unknown {sorted(set(clients) - set(CLIENTS))}; "
                     f"choose from {CLIENTS}")  # fmt: skip
    if args.fine_graphs_up_to < 1:
        parser.error("--fine-graphs-up-to must be at least 1")
    return Options(args.out, args.backend_lib, args.seconds, args.cxx, instances, args.smoke,
                   shm, delays, args.baseline, args.family, pools, args.server_cpus,
                   args.client_cpus, args.repeats, warmups, args.first_calls,
                   gathers, graphs, preferred, clients, args.fine_graphs_up_to,
                   args.c_api)  # fmt: skip


def _on_off(parser: argparse.ArgumentParser, flag: str, value: str) -> tuple[bool, ...]:
    """``off,on`` -> ``(False, True)``, in the order given, each once."""
    words = tuple(dict.fromkeys(value.split(",")))
    if set(words) - {"off", "on"}:
        parser.error(f"{flag}: unknown {sorted(set(words) - {'off', 'on'})}; choose from off, on")
    return tuple(word == "on" for word in words)


def logged_compiles(log: Path) -> None:
    """Log every command Inductor's C++ builder runs (which compiler, which link flags)."""
    from torch._inductor import cpp_builder

    original = cpp_builder._run_compile_cmd

    def run(cmd_line: str, cwd: str) -> None:
        with log.open("a") as sink:
            sink.write(cmd_line + "\n")
        original(cmd_line, cwd)

    cpp_builder._run_compile_cmd = run


def build(module, package: Path, options: Options) -> dict:
    import torch

    spec = options.spec
    logged_compiles(options.out / spec.report.replace(".json", "-compile-commands.txt"))
    if options.cxx:
        torch._inductor.config.cpp.cxx = (None, options.cxx)
    if spec.channels_last:
        module = module.to(memory_format=torch.channels_last)
    device = options.settings.device
    inputs = tuple(
        torch.from_numpy(a).to(device) for a in spec.example(np.random.default_rng(0), 8)
    )
    batch = torch.export.Dim("batch", min=1, max=spec.max_batch)
    started = time.perf_counter()
    with torch.no_grad():
        program = torch.export.export(
            module, inputs, dynamic_shapes=tuple({0: batch} for _ in inputs)
        )
        exported_s = time.perf_counter() - started
        torch._inductor.aoti_compile_and_package(program, package_path=str(package))
        reference = module(*inputs).float().cpu()
    torch.save({"inputs": [x.cpu() for x in inputs], "outputs": reference}, str(package) + ".ref")
    return {
        "build_s": round(time.perf_counter() - started, 1),
        "export_s": round(exported_s, 1),
        "cxx": torch._inductor.config.cpp.cxx[1],
        "env_cxx": os.environ.get("CXX"),
        "libraries": needed(package),
    }


def needed(package: Path) -> dict:
    """Each .so in the package: its NEEDED libraries (is libstdc++ shared or inside?)."""
    work = Path(tempfile.mkdtemp(prefix="aoti-so-"))
    with zipfile.ZipFile(package) as archive:
        names = [n for n in archive.namelist() if n.endswith(".so")]
        archive.extractall(work, names)
    found = {}
    for name in names:
        dynamic = subprocess.run(["readelf", "-d", str(work / name)], capture_output=True,
                                 text=True).stdout  # fmt: skip
        found[Path(name).name] = [ln.split("[")[1].rstrip("]") for ln in dynamic.splitlines()
                                  if "(NEEDED)" in ln]  # fmt: skip
    return found


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


def warmup_config(spec: Family, sizes: Iterable[int] | None = None) -> str:
    """Triton's ``model_warmup`` at every batch size 1..max, or at ``sizes`` (zeros: a plan does
    not depend on the data), run on each instance's own thread before the model is ready,
    largest first (a graph captured at each then reuses the larger ones' memory)."""
    sizes = capture_order(tuple(range(1, spec.max_batch + 1) if sizes is None else sizes))
    inputs = " ".join(
        f'inputs {{ key: "INPUT__{i}" value {{ data_type: TYPE_{dtype} '
        f"dims: [ {', '.join(map(str, dims))} ] zero_data: true }} }}"
        for i, (dtype, dims) in enumerate(spec.inputs)
    )
    samples = ",\n  ".join(f'{{ name: "bs{b}" batch_size: {b} {inputs} }}' for b in sizes)
    return f"model_warmup [\n  {samples}\n]\n"


def graphs_config(spec: Family, warmup: bool, sizes: tuple[int, ...] = ()) -> str:
    """Triton's ``optimization.cuda.graphs`` with a graph per size in ``sizes`` (default: those
    the kit's build writes, ``build_engines --engine aoti --cuda-graphs``), each captured at
    load by a warm-up request of its size unless the row already warms up every size."""
    sizes = sizes or graph_batch_sizes(spec.max_batch)
    specs = ", ".join(f"{{ batch_size: {b} }}" for b in sizes)
    graphs = f"optimization {{ cuda {{ graphs: true graph_spec [ {specs} ] }} }}\n"
    return graphs + ("" if warmup else warmup_config(spec, sizes))


def aoti_config(
    spec: Family,
    name: str,
    instances: int,
    gpu: bool,
    delay_us: int = 2000,
    warmup: bool = False,
    gather: int = 0,
    graphs: bool = False,
    preferred: bool = True,
    graph_sizes: tuple[int, ...] = (),
) -> str:
    """Batching as gpu_engines.md's best TorchScript row (2000 us, the family's preferred
    sizes); delay 0 and no preferred sizes for the batch-1 row, where waiting only adds
    latency. ``warmup``: every batch size once per instance at load (:func:`warmup_config`);
    ``gather``: the backend's gather-kernel threshold (0: the parameter is left out);
    ``graphs``: Triton's ``optimization.cuda.graphs`` (:func:`graphs_config`); ``preferred``
    off: no preferred sizes, so a batch goes when an instance is free or the delay ends;
    ``graph_sizes``: the graphs' batch sizes (default: the build's)."""
    batching = f"max_queue_delay_microseconds: {delay_us}"
    if delay_us and preferred:
        sizes = ", ".join(str(b) for b in spec.preferred)
        batching += f" preferred_batch_size: [ {sizes} ]"
    kind = "kind: KIND_GPU gpus: [ 0 ]" if gpu else "kind: KIND_CPU"
    inputs = ", ".join(
        f'{{ name: "INPUT__{i}" data_type: TYPE_{dtype} dims: [ {", ".join(map(str, dims))} ] }}'
        for i, (dtype, dims) in enumerate(spec.inputs)
    )
    extra = (warmup_config(spec) if warmup else "") + gather_parameter(gather)
    extra += graphs_config(spec, warmup, graph_sizes) if graphs else ""
    return f"""name: "{name}"
backend: "{AOTI_BACKEND}"
platform: "torch_aoti"
max_batch_size: {spec.max_batch}
input [ {inputs} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ {spec.output_dims} ] }} ]
instance_group [ {{ {kind} count: {instances} }} ]
dynamic_batching {{ {batching} }}
{extra}"""


def gather_parameter(threshold: int) -> str:
    """The kit's backend build reads GATHER_KERNEL_BUFFER_THRESHOLD (scripts/gpu/aoti_backend.sh);
    nothing for 0, the backend's own default."""
    if not threshold:
        return ""
    value = f'value {{ string_value: "{threshold}" }}'
    return f'parameters {{ key: "GATHER_KERNEL_BUFFER_THRESHOLD" {value} }}\n'


def torchscript_baseline(module, settings: Settings) -> Path:
    """The TorchScript the native pytorch backend serves (gpu_engines.md's ``native_i4_d2000p``),
    traced before the AOTI build turns the module channels_last."""
    from triton_kit.benchmarks.gpu.serving import traced

    path = Path(tempfile.mkdtemp(prefix="ts-")) / "model.pt"
    traced(module, settings, False).save(str(path))
    return path


def write_repository(
    repo: Path, package: Path, model_pt: Path, settings: Settings, options: Options
) -> list[str]:
    from triton_kit.benchmarks.gpu.serving import PREFERRED as TS_PREFERRED
    from triton_kit.benchmarks.gpu.serving import Variant, write_variant

    spec = options.spec
    names = []
    batched = [
        (n, delay, warm == "all", gather, graphs, preferred)
        for graphs in options.graphs
        for warm in options.warmups
        for gather in options.gathers
        for delay in options.delays_us
        for preferred in options.preferred
        for n in options.instances
    ]
    single = [(1, 0, False, 0, graphs, False) for graphs in options.graphs]
    for count, delay, warm, gather, graphs, preferred in [*single, *batched]:  # batch 1 first
        name = f"{spec.prefix}_i{count}_d{delay}" + ("p" if preferred else "")
        name += (f"_g{gather}" if gather else "") + ("_warm" * warm) + ("_cg" * graphs)
        (repo / name / "1").mkdir(parents=True)
        shutil.copy2(package, repo / name / "1" / "model.pt2")
        config = aoti_config(spec, name, count, settings.gpu, delay, warm, gather, graphs,
                             preferred, graph_sizes=options.graph_sizes)  # fmt: skip
        (repo / name / "config.pbtxt").write_text(config)
        names.append(name)
    if not options.with_baseline:
        return names
    write_variant(repo, Variant(BASELINE, 4, 2000, TS_PREFERRED), model_pt, settings)
    return [*names, BASELINE]


def served(repo: Path, names: list[str], options: Options, reference: Path) -> dict:
    """Each model on a server of its own (a crash loses one row, and leaves its log): the
    package's outputs against ``reference``, then the batched loads, then c1 for the no-delay
    package and the TorchScript baseline; with ``--c-api``, the no-delay package at c1 once
    more inside perf_analyzer (:func:`c_api_row`), its own server stopped."""
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
                                  pool_mb=pool))  # fmt: skip
        if options.c_api and batch_one_row(name):
            rows.update(c_api_row(alone, name, backends, options, input_data))
    return rows


def c_api_row(repo: Path, name: str, backends: Path, options: Options, input_data: str) -> dict:
    """``name`` at c1 with Triton inside perf_analyzer's own process (``<name>_c1_capi``): the
    served c1 row less gRPC, so the batch-1 gap splits into Triton's part and the network's.
    perf_analyzer then holds the server as well, so it runs on the server's cores."""
    from triton_kit.benchmarks.harness.perf_analyzer import CApi, c_api_server_dir
    from triton_kit.benchmarks.launcher import measure

    server = c_api_server_dir(Path(tempfile.mkdtemp(prefix="capi-")), backends)
    key = load_key(name, 1, "none", "capi", 1)
    row = measure("", name, 1, options.seconds, options.out, input_data=input_data,
                  cpus=options.server_cpus, c_api=CApi(server, repo))  # fmt: skip
    print(key, row, flush=True)
    return {key: row}


def batch_one_row(name: str) -> bool:
    """The no-delay model (``..._d0``, with or without ``_cg``): measured at c1 only."""
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
    """``<label>_c<N>[_<shm>_shm][_async|_capi][_rep<R>]``: aoti_report.LOAD reads it back
    (``client`` sync, async, or capi: perf_analyzer's C API mode)."""
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
) -> dict:
    """One model on a bare server of its own; rows are keyed by ``name`` (``_pool<N>`` added
    where the memory pools are not Triton's defaults)."""
    from triton_kit.benchmarks.harness.perf_analyzer import pinned
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
            return {f"{label}_error": f"server not ready; see {log.name}"}
        rows[f"{label}_load"] = {"seconds": round(time.perf_counter() - started, 1)}
        print(f"{label}_load", rows[f"{label}_load"], flush=True)
        url = f"127.0.0.1:{ports[1]}"
        if reference is not None:
            rows[f"{label}_outputs"] = served_outputs(url, name, options.spec, reference)
            print(label, rows[f"{label}_outputs"], flush=True)
        c1_ways = SHARED_MEMORY if options.settings.gpu else ("none", "system")
        loads = (
            [(1, shm, "sync") for shm in c1_ways]
            if batch_one_row(name)
            else [
                (options.concurrency, shm, client)
                for shm in options.shared_memory
                for client in options.clients
            ]
        )
        if c1:
            loads.append((1, "none", "sync"))
        data = "random" if name == BASELINE else input_data
        for concurrency, shm, client, repeat in repeated(loads, options.repeats):
            if process.poll() is not None:
                break
            key = load_key(label, concurrency, shm, client, repeat)
            rows[key] = measure(url, name, concurrency, options.seconds, options.out,
                                shared_memory=shm, output_bytes=options.spec.output_bytes,
                                input_data=data, cpus=options.client_cpus,
                                asynchronous=client == "async")  # fmt: skip
            print(key, rows[key], flush=True)
        rows[f"{label}_server_alive"] = process.poll() is None
    finally:
        stop(process)
    return rows


def run(options: Options) -> dict:
    import torch

    settings, spec = options.settings, options.spec
    env = {"family": options.family}
    env |= {"graph_sizes": list(options.graph_sizes)} if any(options.graphs) else {}
    results = Results(options.out, env, name=spec.report)
    module = spec.make(settings).to(settings.device).eval()
    package = Path(tempfile.mkdtemp(prefix="aoti-pkg-")) / f"{spec.prefix}.pt2"
    model_pt = torchscript_baseline(module, settings) if options.with_baseline else Path()
    results.step("build", lambda: build(module, package, options))
    graphs = any(options.graphs)
    if not results.step("in_process", lambda: in_process(package, spec, settings, graphs)):
        return results.data
    if options.first_calls:
        results.step("first_calls", lambda: first_calls(package, spec, settings))
    if settings.gpu:
        torch.cuda.empty_cache()
    repo = Path(tempfile.mkdtemp(prefix="aoti-repo-"))
    names = results.step(
        "repository", lambda: write_repository(repo, package, model_pt, settings, options)
    )
    if settings.gpu:
        torch.cuda.empty_cache()
    if names:
        reference = Path(str(package) + ".ref")
        results.step("served", lambda: served(repo, names, options, reference))
    return results.data


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    data = run(options)
    print(json.dumps({k: v for k, v in data.items() if k != "errors"}, default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
