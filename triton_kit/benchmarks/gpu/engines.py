"""ResNet-50's engines in process on the GPU: what a compiled engine would give Triton (issue 30).

    python -m triton_kit.benchmarks.gpu.engines --out OUT_DIR [--batches 64,256]

Eager, eager channels_last, ``torch.compile`` (max-autotune, channels_last) and an
AOTInductor package, each fed pinned host UINT8 images (the copy to the GPU included, as
Triton's backends pay it). The AOTInductor package is compiled and loaded in child
processes: its load segfaulted on the H100 before (issue 30), and a crash there must not end
the run; its exit status and the last lines of its output are recorded instead.
Writes engines.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from triton_kit.benchmarks.gpu.load import stats
from triton_kit.benchmarks.gpu.models import resnet50_uint8
from triton_kit.benchmarks.gpu.settings import Settings

AOTI_TIMEOUT_S = 240


def images(batch: int, device_pinned: bool):
    import torch

    host = torch.randint(0, 256, (batch, 224, 224, 3), dtype=torch.uint8)
    return host.pin_memory() if device_pinned else host


def timed(fn, host, seconds: float) -> dict:
    """items/s and latency of fn(host copied to the GPU), after a few untimed calls."""
    import torch

    for _ in range(3):
        fn(host.cuda(non_blocking=True))
    torch.cuda.synchronize()
    latencies, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        fn(host.cuda(non_blocking=True)).cpu()
        latencies.append(time.perf_counter() - start)
    return {**stats(latencies), "items_per_s": host.shape[0] * len(latencies) / sum(latencies)}


def variants(settings: Settings):
    """name -> (module factory); each built lazily so one failure costs one row."""
    import torch

    def eager():
        return resnet50_uint8(settings).cuda()

    def channels_last():
        return eager().to(memory_format=torch.channels_last)

    def compiled():
        return torch.compile(channels_last(), mode="max-autotune")

    return {"eager": eager, "channels_last": channels_last, "compile_max_autotune": compiled}


def aoti(batch: int, seconds: float, work: Path) -> dict:
    """Compile an AOTInductor package in one child, load and time it in another."""
    package = work / "resnet50.pt2"
    compile_code = (
        "import torch, sys\n"
        "from triton_kit.benchmarks.gpu.models import resnet50_uint8\n"
        "from triton_kit.benchmarks.gpu.settings import Settings\n"
        "m = resnet50_uint8(Settings(out=None)).cuda().eval()\n"
        f"x = torch.randint(0, 256, ({batch}, 224, 224, 3), dtype=torch.uint8, device='cuda')\n"
        "with torch.no_grad():\n"
        "    ep = torch.export.export(m, (x,))\n"
        f"    torch._inductor.aoti_compile_and_package(ep, package_path={str(package)!r})\n"
    )
    load_code = (
        "import faulthandler, json, time, torch\n"
        "faulthandler.enable()\n"
        "torch.cuda.init()\n"
        f"runner = torch._inductor.aoti_load_package({str(package)!r})\n"
        f"x = torch.randint(0, 256, ({batch}, 224, 224, 3), dtype=torch.uint8).pin_memory()\n"
        "for _ in range(3): runner(x.cuda())\n"
        "torch.cuda.synchronize(); n = 0; t = time.perf_counter()\n"
        f"while time.perf_counter() - t < {seconds}:\n"
        "    y = runner(x.cuda())\n"
        "    (y[0] if isinstance(y, (list, tuple)) else y).cpu()\n"
        "    n += 1\n"
        f"print(json.dumps({{'items_per_s': {batch} * n / (time.perf_counter() - t)}}))\n"
    )
    result = {}
    for stage, code in (("compile", compile_code), ("load_and_run", load_code)):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=AOTI_TIMEOUT_S
        )
        result[stage] = {
            "returncode": done.returncode,
            "seconds": round(time.perf_counter() - start, 1),
            "tail": (done.stdout + done.stderr)[-1500:],
        }
        if done.returncode != 0:
            break
        if stage == "load_and_run":
            result.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return result


def run(out: Path, batches: tuple[int, ...], seconds: float) -> dict:
    import torch

    settings = Settings(out=out)
    results: dict = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}

    def save() -> None:
        (out / "engines.json").write_text(json.dumps(results, indent=1))

    for name, factory in variants(settings).items():
        try:
            start = time.perf_counter()
            module = factory()
            with torch.no_grad():
                for batch in batches:
                    row = timed(module, images(batch, True), seconds)
                    results[f"{name}_bs{batch}"] = row
            results[f"{name}_setup_s"] = round(time.perf_counter() - start, 1)
        except Exception as exc:  # one failed engine is a row, not the end of the run
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:1500]}
        save()
        print(f"[{name}] done", flush=True)
    with tempfile.TemporaryDirectory() as work:
        try:
            results["aoti_bs256"] = aoti(max(batches), seconds, Path(work))
        except subprocess.TimeoutExpired as exc:
            results["aoti_bs256"] = {"error": f"timed out after {exc.timeout} s"}
    save()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triton_kit.benchmarks.gpu.engines")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batches", default="64,256")
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    batches = tuple(int(b) for b in args.batches.split(","))
    print(json.dumps(run(args.out, batches, args.seconds), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
