"""Where the TorchScript search's time goes on this GPU: one call of ``nmt_generate`` (saved and
loaded, simple executor, as Triton's pytorch backend runs it) against the same traced decoder
step driven from Python, per step; then torch.profiler's top ops of one call.

    python scripts/gpu/diagnostics/nmt_generate_profile.py [--size large|tiny] [--dtype fp32|fp16]

Prints sentences/s over batches of varied sizes (``--executor``), ms per call and per step,
the step alone, op counts per step, and CUDA vs CPU time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from triton_kit.build_engines.families.nmt.export import load_model
from triton_kit.build_engines.families.nmt.torchscript.generate import generation_module
from triton_kit.build_engines.families.nmt.transformer import TRANSFORMER, decode_settings
from triton_kit.python_models.nmt.decode import Job
from triton_kit.python_models.nmt.generate import torch_generate_feeds

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def _checkpoint(size: str, work: Path) -> Path:
    if size == "tiny":
        from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT

        return DEFAULT_CHECKPOINT
    from triton_kit.benchmarks.nmt import large

    return large.write_checkpoint(work / "large-checkpoint")


def _jobs(model, count: int, beam: int, max_length: int) -> list[Job]:
    vocab = model.config.vocab_size
    torch.manual_seed(0)
    return [
        Job([*torch.randint(5, vocab - 1, (12,)).tolist(), 0], beam, max_length)
        for _ in range(count)
    ]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_module(module, jobs: list[Job]):
    """One call on ``jobs``, on the current device (a frozen module has no parameters)."""
    feeds = torch_generate_feeds(jobs, module.pad_id)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.inference_mode():
        return module(*(torch.from_numpy(v).to(device) for v in feeds.values())).cpu().numpy()


def _time(fn, repeats: int) -> float:
    fn()
    _sync()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync()
    return (time.perf_counter() - start) / repeats * 1e3


VARIED = (1, 4, 8, 16, 32, 3, 12, 24, 2, 6)  # batch sizes a served model sees in turn


def _varied_batches(module, model, beam: int, executor: str) -> None:
    """Calls of varied batch sizes, twice: the first pass pays any re-specialisation."""
    pool = _jobs(model, max(VARIED), beam, 32)
    for attempt in ("first", "second"):
        start = time.perf_counter()
        for size in VARIED:
            run_module(module, pool[:size])
        seconds = time.perf_counter() - start
        print(
            f"{executor} executor, varied batches ({attempt} pass): "
            f"{sum(VARIED) / seconds:.1f} sentences/s",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="large", choices=("tiny", "large"))
    parser.add_argument("--dtype", default="fp32", choices=tuple(DTYPES))
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "--executor",
        default="simple",
        choices=("simple", "profiling"),
        help="the JIT executor of this process (the first call picks it): simple is what "
        "Triton's pytorch backend runs with DISABLE_OPTIMIZED_EXECUTION; profiling only "
        "times the varied batches",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    model = load_model(_checkpoint(args.size, work))
    dtype = DTYPES[args.dtype]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = generation_module(TRANSFORMER, model, decode_settings(model), device, dtype)
    path = work / "model.pt"
    module.save(str(path))
    loaded = torch.jit.load(str(path), map_location=device)
    jobs = _jobs(model, args.sentences, args.beam, 32)
    optimized = args.executor == "profiling"
    with torch.jit.optimized_execution(optimized):
        _varied_batches(loaded, model, args.beam, args.executor)
        ids = run_module(loaded, jobs)
        steps = ids.shape[1]
        if optimized:
            return
        ms = _time(lambda: run_module(loaded, jobs), 3)
        print(
            f"{args.size} {args.dtype} beam {args.beam}, {args.sentences} sentences: "
            f"{ms:.1f} ms a call, {steps} steps, {ms / steps:.2f} ms a step",
            flush=True,
        )
        # The search is frozen (torch.jit.freeze): its step is no longer a submodule to time
        # alone; the profile below splits a call's time by operator instead.
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            run_module(loaded, jobs)
        events = prof.key_averages()
        ops = [e for e in events if e.key.startswith("aten::")]
        print(f"  aten ops a step: {sum(e.count for e in ops) / steps:.0f}", flush=True)
        cuda_us = sum(e.self_device_time_total for e in events)
        print(f"  CUDA kernel time a step: {cuda_us / steps / 1e3:.2f} ms", flush=True)
        print(events.table(sort_by="count", row_limit=25), flush=True)
        print(events.table(sort_by="self_cpu_time_total", row_limit=15), flush=True)


if __name__ == "__main__":
    main()
