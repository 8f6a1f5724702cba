"""GPU benchmark (issue 10): in-process PyTorch vs served by the embedded Triton, on one GPU.

Run on a GPU host (scripts/gpu/bench.sh does it on the lent H100)::

    python -m triton_kit.benchmarks.gpu --out OUT_DIR            # everything, about 8 minutes
    python -m triton_kit.benchmarks.gpu --out OUT_DIR --quick    # fewer points, 2 s each
    python -m triton_kit.benchmarks.gpu --out OUT_DIR --smoke    # CPU, tiny shapes: checks the code

Measures, side by side in one run:
  families  ResNet-50 (UINT8 224 input), BERT-base, BERT-large (seq 128): in-process eager
            and CUDA graph vs served (batch-1 sequential, one-item requests at concurrency
            64/256, 64-item requests), FP16 TorchScript behind the python-based pytorch
            backend with CUDA graphs per batch bucket;
  input     ResNet-50 fed JPEG (nvJPEG + torch resize on the GPU) vs decoded UINT8 640x480;
  shm       those UINT8 inputs inline vs system vs CUDA shared memory;
  minilm    MiniLM-L6 built with `build_engines bert --engine torch`, served by the bert
            python model on mixed text lengths vs the same steps in-process.
Models have RANDOM weights (speed only). Every step is guarded: a failing row is recorded
with its traceback and the run goes on. Writes gpu.md and gpu.json into OUT_DIR (and
gpu.json after every step, so a run cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.settings import FAMILY_NAMES, ROW_NAMES, Settings
from triton_kit.benchmarks.harness.measure import git_revision


def parse_settings(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.gpu",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="where gpu.md/gpu.json go")
    parser.add_argument(
        "--seconds", type=float, help="per measured point (default 5; --quick 2; --smoke 0.3)"
    )
    parser.add_argument(
        "--warmup",
        type=float,
        help="seconds of untimed load before each served point (default 2; --smoke 0)",
    )
    parser.add_argument("--processes", type=int, default=8, help="client processes (default 8)")
    parser.add_argument(
        "--families",
        default=",".join(FAMILY_NAMES),
        help="comma-separated, from %(default)s; '' for none",
    )
    parser.add_argument(
        "--rows", default=",".join(ROW_NAMES), help="comma-separated, from %(default)s; '' for none"
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer batch sizes and loads, 2 s per point"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="on CPU with tiny shapes and 2 clients: runs every step once to catch mistakes "
        "before the GPU run (numbers meaningless)",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="tokenizer.json for the MiniLM shape where all-MiniLM-L6-v2 is not installed "
        "(scripts/gpu/prepare.sh carries one)",
    )
    args = parser.parse_args(argv)
    seconds = args.seconds or (0.3 if args.smoke else 2.0 if args.quick else 5.0)
    return Settings(
        out=args.out,
        device="cpu" if args.smoke else "cuda",
        seconds=seconds,
        warmup=args.warmup if args.warmup is not None else (0.0 if args.smoke else 2.0),
        processes=2 if args.smoke else args.processes,
        families=_names(args.families, FAMILY_NAMES, "--families"),
        rows=_names(args.rows, ROW_NAMES, "--rows"),
        quick=args.quick,
        smoke=args.smoke,
        tokenizer=args.tokenizer,
    )


def _names(text: str, allowed: tuple[str, ...], flag: str) -> tuple[str, ...]:
    names = tuple(n for n in text.split(",") if n)
    unknown = set(names) - set(allowed)
    if unknown:
        raise SystemExit(f"{flag}: unknown {sorted(unknown)}; choose from {list(allowed)}")
    return names


def environment(settings: Settings) -> dict[str, str]:
    import torch

    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except FileNotFoundError:
        smi = ""
    return {
        "gpu": smi or "none (CPU)",
        "mode": "smoke (CPU, tiny shapes)"
        if settings.smoke
        else "quick"
        if settings.quick
        else "full",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "numpy": np.__version__,
        "triton": "2.51.0 (nvidia-pytriton 0.7.0 binary), Triton's own pytorch backend r24.10",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_revision(),
    }


class Run:
    """Results by section; every step guarded; gpu.json rewritten after each."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.results: dict = {"env": environment(settings)}
        self.started = time.perf_counter()

    def section(self, name: str) -> dict:
        return self.results.setdefault(name, {})

    def step(self, section: str, label: str, fn: Callable[[], object]) -> object:
        print(f"== {section}: {label} ({time.perf_counter() - self.started:.0f} s)", flush=True)
        try:
            value = fn()
        except Exception:
            value = None
            errors = self.section(section).setdefault("errors", {})
            errors[label] = traceback.format_exc()
            print(errors[label], flush=True)
        self.save()
        return value

    def save(self) -> None:
        self.results["env"]["elapsed_s"] = f"{time.perf_counter() - self.started:.0f}"
        (self.settings.out / "gpu.json").write_text(json.dumps(self.results, indent=2) + "\n")


def run(settings: Settings) -> dict:
    from triton_kit.benchmarks.gpu import families as gpu_families
    from triton_kit.benchmarks.gpu import rows as gpu_rows

    run = Run(settings)
    repo = Path(tempfile.mkdtemp(prefix="gpu-bench-repo-"))
    for family in settings.families:
        section = run.section(family)
        run.step(
            family,
            "in-process",
            lambda f=family, s=section: gpu_families.prepare_family(f, repo, settings, s),
        )
    if "input" in settings.rows or "shm" in settings.rows:
        run.step("input", "write models", lambda: gpu_rows.prepare_inputs(repo, settings))
    if "minilm" in settings.rows:
        work = Path(tempfile.mkdtemp(prefix="gpu-bench-work-"))
        info = run.step(
            "minilm",
            "build (--engine torch)",
            lambda: gpu_rows.prepare_minilm(repo, work, settings),
        )
        run.section("minilm").update(info or {})
        section = run.section("minilm")
        run.step(
            "minilm",
            "in-process",
            lambda: section.__setitem__("in_process", gpu_rows.minilm_in_process(repo, settings)),
        )
    run.step("server", "serve", lambda: _serve(run, repo, settings))
    return run.results


def _serve(run: Run, repo: Path, settings: Settings) -> None:
    from triton_kit.benchmarks.gpu import families as gpu_families
    from triton_kit.benchmarks.gpu import rows as gpu_rows
    from triton_kit.server.launcher import ServerConfig, TritonServer

    log = settings.out / "tritonserver.log"
    config = ServerConfig(
        model_repository=repo, http_port=0, grpc_port=0, metrics_port=0, log_file=log
    )
    with TritonServer(config) as server:
        url = server.grpc_url.removeprefix("grpc://")
        plan: list[tuple[str, list]] = [
            (family, gpu_families.served_steps(family, settings, server.api_key))
            for family in settings.families
        ]
        if "input" in settings.rows:
            plan.append(("input", gpu_rows.input_steps(settings)))
        if "shm" in settings.rows:
            plan.append(("shm", gpu_rows.shm_steps(settings, server.api_key)))
        if "minilm" in settings.rows:
            plan.append(("minilm", gpu_rows.minilm_steps(settings)))
        for section, steps in plan:
            served = run.section(section).setdefault("served", {})
            for label, measure in steps:
                run.step(
                    section, label, lambda m=measure, lb=label, s=served: s.__setitem__(lb, m(url))
                )


def main(argv: list[str] | None = None) -> int:
    settings = parse_settings(argv)
    settings.out.mkdir(parents=True, exist_ok=True)
    results = run(settings)
    from triton_kit.benchmarks.gpu.report import markdown

    text = markdown(results)
    (settings.out / "gpu.md").write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
