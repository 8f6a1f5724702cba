"""The AOTInductor engine on the GPU: built, checked, timed in process and served natively.

    python -m triton_kit.benchmarks.gpu.aoti --out OUT --backend-lib LIB [--seconds 2]

Issue 30 asks for a compiled engine Triton serves without the python stub. Triton's
pytorch backend loads AOTInductor packages (``platform: "torch_aoti"``) from r26.03 on;
``LIB`` is that backend built on the GPU machine (``scripts/gpu/aoti_backend.sh``) and
served under its own name, ``pytorch_aoti`` (Triton 2.51 accepts any platform for a
backend it does not know, and the backend API is the same 1.19).

Steps (``aoti.json`` is rewritten after each, so a run cut short keeps what it measured):

1. ``build``: ResNet-50 FP16 (channels_last, UINT8 NHWC input), ``torch.export`` with a
   dynamic batch (1..256), ``aoti_compile_and_package``. Every compile and link command is
   logged, with the libraries the package's .so needs. ``--cxx`` picks Inductor's C++
   compiler: on the H100 machine Inductor took ``/opt/gcc/bin/g++``, whose link put a
   static libstdc++ into the .so, and that copy's ``std::regex`` (``parse_device_str``)
   crashed on the process's shared-libstdc++ locale (cuda-gdb backtrace, gpu.md).
2. ``in_process``: the package loaded by ``aoti_load_package``, its logits checked against
   the eager module's on the build's images, then timed at batch 1/64/256, host copies
   included.
3. ``served``: the package through ``pytorch_aoti`` at each ``--instances`` count and
   ``--delays`` queue delay (default 2000 us; preferred 64/128/256) and at 1 instance with no
   delay (the batch-1 row), and TorchScript through Triton's own pytorch backend (4
   instances; ``--no-baseline`` leaves it out, and the GPU run need not build that backend),
   each model on a bare ``tritonserver`` of its own so a crash loses one row and keeps its
   log. The package's served logits are checked first (the check images as concurrent
   one-image requests, batched together); then one-image requests through perf_analyzer at
   c256 for each ``--shared-memory`` way; the no-delay package at c1 inline and each of those
   ways (shared memory saves the 150 KB image's trip through gRPC, the batch-1 gap's
   suspect); the baseline at c1 inline.
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
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks.gpu.load import stats, timed_loop
from triton_kit.benchmarks.gpu.models import resnet50_uint8
from triton_kit.benchmarks.gpu.serving import Results
from triton_kit.benchmarks.gpu.settings import Settings

PREFERRED = (64, 128, 256)
AOTI_BACKEND = "pytorch_aoti"
LOGITS_BYTES = 1000 * 4  # one image's FP32 logits, for perf_analyzer's output regions
SHARED_MEMORY = ("none", "system", "cuda")


@dataclass(frozen=True)
class Options:
    out: Path
    backend_lib: Path | None
    seconds: float
    cxx: str | None  # Inductor's C++ compiler; None: its own choice ($CXX, else g++)
    instances: tuple[int, ...]
    smoke: bool = False  # CPU, tiny ResNet, 2 clients: checks the code where there is no GPU
    shared_memory: tuple[str, ...] = SHARED_MEMORY  # how perf_analyzer sends images at c256
    delays_us: tuple[int, ...] = (2000,)  # queue delays of the batched package rows
    baseline: bool = True  # TorchScript through Triton's r24.10 pytorch backend beside them

    @property
    def settings(self) -> Settings:
        device = "cpu" if self.smoke else "cuda"
        return Settings(out=self.out, device=device, seconds=self.seconds, smoke=self.smoke)

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency(256)


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.gpu.aoti", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True)
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
        help="leave out the TorchScript row (needs Triton's r24.10 pytorch backend)",
    )  # fmt: skip
    parser.add_argument(
        "--shared-memory", default=",".join(SHARED_MEMORY),
        help="how the c256 loads send their images: inside the gRPC message (none), through "
        "system or CUDA shared memory (default: all three)",
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
    return Options(args.out, args.backend_lib, args.seconds, args.cxx, instances, args.smoke,
                   shm, delays, args.baseline)  # fmt: skip


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

    logged_compiles(options.out / "aoti-compile-commands.txt")
    if options.cxx:
        torch._inductor.config.cpp.cxx = (None, options.cxx)
    module = module.to(memory_format=torch.channels_last)
    device = options.settings.device
    x = torch.randint(0, 256, (8, 224, 224, 3), dtype=torch.uint8, device=device)
    batch = torch.export.Dim("batch", min=1, max=256)
    started = time.perf_counter()
    with torch.no_grad():
        program = torch.export.export(module, (x,), dynamic_shapes=({0: batch},))
        torch._inductor.aoti_compile_and_package(program, package_path=str(package))
        reference = module(x).float().cpu()
    torch.save({"x": x.cpu(), "logits": reference}, str(package) + ".ref")
    return {
        "build_s": round(time.perf_counter() - started, 1),
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


def check(runner, package: Path, device: str) -> dict:
    """The loaded package against the eager module's logits on the build's images."""
    import torch

    ref = torch.load(str(package) + ".ref")
    with torch.inference_mode():
        y = runner(ref["x"].to(device)).float().cpu()
    top = (y.argmax(1) == ref["logits"].argmax(1)).float().mean().item()
    return {"max_abs_diff": float((y - ref["logits"]).abs().max()), "top1_agreement": top}


def in_process(package: Path, settings: Settings, batches=(1, 64, 256)) -> dict:
    import numpy as np
    import torch

    runner = torch._inductor.aoti_load_package(str(package))
    rows: dict = {"check": check(runner, package, settings.device)}
    print("check", rows["check"], flush=True)
    rng = np.random.default_rng(0)
    for batch in batches:
        host = torch.from_numpy(rng.integers(0, 256, (batch, 224, 224, 3), dtype=np.uint8))
        if settings.gpu:
            host = host.pin_memory()

        def run(host=host):
            with torch.inference_mode():
                return runner(host.to(settings.device, non_blocking=True)).cpu()

        latencies = timed_loop(run, settings.seconds)
        rows[f"bs{batch}"] = {
            **stats(latencies),
            "items_per_s": batch * len(latencies) / sum(latencies),
        }
        print(batch, rows[f"bs{batch}"], flush=True)
    return rows


def aoti_config(name: str, instances: int, gpu: bool, delay_us: int = 2000) -> str:
    """Batching as gpu.md's best TorchScript row (2000 us, preferred 64/128/256); delay 0 and
    no preferred sizes for the batch-1 row, where waiting only adds latency."""
    preferred = ", ".join(str(b) for b in PREFERRED)
    batching = (
        f"max_queue_delay_microseconds: {delay_us} preferred_batch_size: [ {preferred} ]"
        if delay_us
        else "max_queue_delay_microseconds: 0"
    )
    kind = "kind: KIND_GPU gpus: [ 0 ]" if gpu else "kind: KIND_CPU"
    return f"""name: "{name}"
backend: "{AOTI_BACKEND}"
platform: "torch_aoti"
max_batch_size: 256
input [ {{ name: "INPUT__0" data_type: TYPE_UINT8 dims: [ 224, 224, 3 ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
instance_group [ {{ {kind} count: {instances} }} ]
dynamic_batching {{ {batching} }}
"""


def torchscript_baseline(module, settings: Settings) -> Path:
    """The TorchScript the native pytorch backend serves (gpu.md's ``native_i4_d2000p``),
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

    names = []
    batched = [(n, delay) for delay in options.delays_us for n in options.instances]
    for count, delay in [(1, 0), *batched]:  # batch 1 first: quick, and kept if time runs out
        name = f"aoti_i{count}_d{delay}" + ("p" if delay else "")
        (repo / name / "1").mkdir(parents=True)
        shutil.copy2(package, repo / name / "1" / "model.pt2")
        (repo / name / "config.pbtxt").write_text(aoti_config(name, count, settings.gpu, delay))
        names.append(name)
    if not options.baseline:
        return names
    write_variant(repo, Variant("native_i4_d2000p", 4, 2000, TS_PREFERRED), model_pt, settings)
    return [*names, "native_i4_d2000p"]


def served(repo: Path, names: list[str], options: Options, reference: Path) -> dict:
    """Each model on a server of its own (a crash loses one row, and leaves its log): the
    package's outputs against ``reference``, then c256, then c1 for the first package and the
    TorchScript baseline."""
    from triton_kit.server.binary import assemble_backend_dir, find_installation

    installation = find_installation()
    backends = assemble_backend_dir(installation, Path(tempfile.mkdtemp(prefix="aoti-b-")) / "b")
    if options.backend_lib is not None:
        (backends / AOTI_BACKEND).mkdir(exist_ok=True)
        shutil.copy2(options.backend_lib, backends / AOTI_BACKEND / f"libtriton_{AOTI_BACKEND}.so")
    rows: dict = {}
    for name in names:
        alone = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        shutil.copytree(repo / name, alone / name)
        single = name == "native_i4_d2000p"
        checked = reference if name.startswith("aoti_") else None
        rows.update(serve_one(alone, name, backends, options, c1=single, reference=checked))
    return rows


def served_outputs(url: str, name: str, reference: Path) -> dict:
    """The reference images as concurrent one-image requests, so the batcher puts several into
    one execution: each response must be its own image's logits (the PT2 output path once gave
    every response the whole batch)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import torch
    import tritonclient.grpc as grpc

    ref = torch.load(str(reference))
    images, expected = ref["x"].numpy(), ref["logits"].numpy()

    def one(row: int) -> np.ndarray:
        client = grpc.InferenceServerClient(url)
        tensor = grpc.InferInput("INPUT__0", [1, *images.shape[1:]], "UINT8")
        tensor.set_data_from_numpy(images[row : row + 1])
        return client.infer(name, [tensor], client_timeout=60).as_numpy("OUTPUT__0")

    with ThreadPoolExecutor(len(images)) as pool:
        got = list(pool.map(one, range(len(images))))
    shapes = sorted({tuple(y.shape) for y in got})
    logits = np.concatenate(got) if shapes == [(1, expected.shape[1])] else None
    return {
        "shapes": [list(s) for s in shapes],
        "max_abs_diff": None if logits is None else float(np.abs(logits - expected).max()),
        "top1_agreement": None
        if logits is None
        else float((logits.argmax(1) == expected.argmax(1)).mean()),
    }


def serve_one(
    repo: Path, name: str, backends: Path, options: Options, c1: bool, reference: Path | None
) -> dict:
    from triton_kit.benchmarks.launcher import bare_command, measure, stop
    from triton_kit.server.binary import find_installation, server_environment
    from triton_kit.server.launcher import free_ports, wait_ready

    ports = free_ports(3)
    log = options.out / f"server-{name}.log"
    with log.open("ab") as sink:
        process = subprocess.Popen(bare_command(repo, backends, ports),
                                   env=server_environment(find_installation()), stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    rows: dict = {}
    try:
        if not wait_ready(f"http://127.0.0.1:{ports[0]}", 600.0):
            return {f"{name}_error": f"server not ready; see {log.name}"}
        url = f"127.0.0.1:{ports[1]}"
        if reference is not None:
            rows[f"{name}_outputs"] = served_outputs(url, name, reference)
            print(name, rows[f"{name}_outputs"], flush=True)
        ways = options.shared_memory
        loads = [(1, shm) for shm in dict.fromkeys(("none", *ways))] if name.endswith("_d0") \
            else [(options.concurrency, shm) for shm in ways]  # fmt: skip
        if c1:
            loads.append((1, "none"))
        for concurrency, shm in loads:
            if process.poll() is not None:
                break
            key = f"{name}_c{concurrency}" + ("" if shm == "none" else f"_{shm}_shm")
            rows[key] = measure(url, name, concurrency, options.seconds, options.out,
                                shared_memory=shm, output_bytes=LOGITS_BYTES)  # fmt: skip
            print(key, rows[key], flush=True)
        rows[f"{name}_server_alive"] = process.poll() is None
    finally:
        stop(process)
    return rows


def run(options: Options) -> dict:
    import torch

    settings = options.settings
    results = Results(options.out, {}, name="aoti.json")
    module = resnet50_uint8(settings).to(settings.device).eval()
    package = Path(tempfile.mkdtemp(prefix="aoti-pkg-")) / "resnet50.pt2"
    model_pt = torchscript_baseline(module, settings) if options.baseline else Path()
    results.step("build", lambda: build(module, package, options))
    batches = (1, 2) if options.smoke else (1, 64, 256)
    if not results.step("in_process", lambda: in_process(package, settings, batches)):
        return results.data
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
