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
2. ``check``: the package loaded in a child process; logits against the eager module.
3. ``in_process``: the loaded package at batch 1/64/256, host copies included.
4. ``served``: one-image requests through perf_analyzer at c256 (then c1 for the first
   package and the baseline), the package through ``pytorch_aoti`` at 1/2/4 instances (output
   pinned memory off) and TorchScript through Triton's own pytorch backend (4 instances), each
   model on a bare ``tritonserver`` of its own so a crash loses one row and keeps its log.
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


@dataclass(frozen=True)
class Options:
    out: Path
    backend_lib: Path | None
    seconds: float
    cxx: str | None  # Inductor's C++ compiler; None: its own choice ($CXX, else g++)
    instances: tuple[int, ...]
    smoke: bool = False  # CPU, tiny ResNet, 2 clients: checks the code where there is no GPU

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
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model: checks the code")
    args = parser.parse_args(argv)
    instances = tuple(int(n) for n in args.instances.split(","))
    return Options(args.out, args.backend_lib, args.seconds, args.cxx, instances, args.smoke)


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


CHECK = r"""
import faulthandler, sys, torch
faulthandler.enable()
path, device = sys.argv[1], sys.argv[2]
runner = torch._inductor.aoti_load_package(path)
ref = torch.load(path + ".ref")
y = runner(ref["x"].to(device)).float().cpu()
top = (y.argmax(1) == ref["logits"].argmax(1)).float().mean().item()
print({"max_abs_diff": float((y - ref["logits"]).abs().max()), "top1_agreement": top})
"""


def check(package: Path, device: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHECK, str(package), device], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    return {"rc": done.returncode, "stdout": done.stdout[-2000:], "stderr": done.stderr[-3000:]}


def in_process(package: Path, settings: Settings, batches=(1, 64, 256)) -> dict:
    import numpy as np
    import torch

    runner = torch._inductor.aoti_load_package(str(package))
    rng = np.random.default_rng(0)
    rows = {}
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


def aoti_config(name: str, instances: int, gpu: bool) -> str:
    preferred = ", ".join(str(b) for b in PREFERRED)
    kind = "kind: KIND_GPU gpus: [ 0 ]" if gpu else "kind: KIND_CPU"
    return f"""name: "{name}"
backend: "{AOTI_BACKEND}"
platform: "torch_aoti"
max_batch_size: 256
input [ {{ name: "INPUT__0" data_type: TYPE_UINT8 dims: [ 224, 224, 3 ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
instance_group [ {{ {kind} count: {instances} }} ]
dynamic_batching {{ max_queue_delay_microseconds: 2000 preferred_batch_size: [ {preferred} ] }}
optimization {{ output_pinned_memory {{ enable: false }} }}
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
    for count in options.instances:
        name = f"aoti_i{count}_d2000p"
        (repo / name / "1").mkdir(parents=True)
        shutil.copy2(package, repo / name / "1" / "model.pt2")
        (repo / name / "config.pbtxt").write_text(aoti_config(name, count, settings.gpu))
        names.append(name)
    write_variant(repo, Variant("native_i4_d2000p", 4, 2000, TS_PREFERRED), model_pt, settings)
    return [*names, "native_i4_d2000p"]


def served(repo: Path, names: list[str], options: Options) -> dict:
    """Each model on a server of its own (a crash loses one row, and leaves its log): c256,
    then c1 for the single-instance package and the TorchScript baseline."""
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
        single = name in (names[0], "native_i4_d2000p")
        rows.update(serve_one(alone, name, backends, options, c1=single))
    return rows


def serve_one(repo: Path, name: str, backends: Path, options: Options, c1: bool) -> dict:
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
        key = f"{name}_c{options.concurrency}"
        rows[key] = measure(url, name, options.concurrency, options.seconds, options.out)
        print(name, rows[key], flush=True)
        if c1 and process.poll() is None:
            rows[f"{name}_c1"] = measure(url, name, 1, options.seconds, options.out)
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
    model_pt = torchscript_baseline(module, settings)
    results.step("build", lambda: build(module, package, options))
    loaded = results.step("check", lambda: check(package, settings.device))
    if not loaded or loaded["rc"] != 0:
        return results.data
    batches = (1, 2) if options.smoke else (1, 64, 256)
    results.step("in_process", lambda: in_process(package, settings, batches))
    if settings.gpu:
        torch.cuda.empty_cache()
    repo = Path(tempfile.mkdtemp(prefix="aoti-repo-"))
    names = results.step(
        "repository", lambda: write_repository(repo, package, model_pt, settings, options)
    )
    if settings.gpu:
        torch.cuda.empty_cache()
    if names:
        results.step("served", lambda: served(repo, names, options))
    return results.data


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    data = run(options)
    print(json.dumps({k: v for k, v in data.items() if k != "errors"}, default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
