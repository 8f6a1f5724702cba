"""ResNet-50: in-process ONNX Runtime vs the same model.onnx served by Triton, in one run.

(a) in-process ONNX Runtime on pre-processed tensors, its session opened from the served
config.pbtxt (same threads, inter-op, execution mode; python_models.common.ort_session);
(b) the core model ``resnet50_model`` through Triton's own onnxruntime backend with dynamic
batching, driven by the SDK and by perf_analyzer (C++ client: the server's own cost); (c) the
full ensemble from encoded image bytes through the SDK. The model alone, perf_analyzer against
(a), is held to the 0.95x goal at concurrency 1 and at saturation (issue 22).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness import model_alone
from triton_kit.benchmarks.harness.measure import (
    RESULT_HEADERS,
    Result,
    markdown_table,
    report_header,
    result_row,
    run_concurrent,
    write_keeping_discussion,
)
from triton_kit.benchmarks.harness.model_alone import Comparison, ServedOnnx
from triton_kit.build_engines.families.sample_images import synthetic_images
from triton_kit.python_models.resnet50.image import preprocess
from triton_kit.server import ServerConfig, TritonServer

ROOT = Path(__file__).resolve().parents[3]
MODEL = "resnet50_model"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.resnet50",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per configuration")
    parser.add_argument("--concurrency", default="1,4,16", help="comma-separated levels")
    parser.add_argument("--output", type=Path, default=RESULTS / "resnet50.md")
    parser.add_argument(
        "--work-dir", type=Path, default=ROOT / "build" / "bench_resnet50", help="perf_analyzer"
    )
    return parser.parse_args(argv)


def pixels(count: int, seed: int) -> np.ndarray:
    return np.stack([preprocess(im) for im in synthetic_images(count, seed=seed)])


def model_alone_rows(
    url: str, served: ServedOnnx, levels: list[int], duration: float, work: Path
) -> tuple[list[Result], list[Comparison], list[str]]:
    """``resnet50_model`` alone at concurrency 1 and the highest level: in-process (one session
    per served instance, opened with the served options; the in-flight images as one batch)
    either side of perf_analyzer (random pixels: speed does not depend on them)."""
    sessions = served.sessions()
    images = pixels(max(levels), seed=5)
    work.mkdir(parents=True, exist_ok=True)
    results, rows, missing = [], [], []
    for c in sorted({1, max(levels)}):
        row = model_alone.compare(
            "224x224 image",
            "concurrency 1" if c == 1 else "saturation",
            lambda seconds, c=c: model_alone.in_process(
                sessions, lambda batch: {"pixel_values": images[:batch]}, c, seconds
            ),
            lambda window, c=c: model_alone.served(url, MODEL, c, window, work),
            duration,
        )
        if isinstance(row, str):
            print(f"  perf_analyzer at c{c}: {row}", flush=True)
            missing.append(f"c{c}: {row}")
            local = model_alone.in_process(
                sessions, lambda b: {"pixel_values": images[:b]}, c, duration
            )
        else:
            rows.append(row)
            local = row.local
        results.append(replace(local, name=f"(a) {local.name}", concurrency=c))
    return results, rows, missing


async def core_model(url: str, levels: list[int], duration: float) -> list[Result]:
    import tritonclient.grpc.aio as grpcclient

    images = pixels(16, seed=6)
    client = grpcclient.InferenceServerClient(url)
    inputs = []
    for i in range(len(images)):
        tensor = grpcclient.InferInput("pixel_values", [1, 3, 224, 224], "FP32")
        tensor.set_data_from_numpy(images[i : i + 1])
        inputs.append(tensor)

    async def call(i: int) -> int:
        await client.infer(MODEL, [inputs[i % len(inputs)]])
        return 1

    name = f"(b) Triton {MODEL} (Triton's own onnxruntime backend), SDK client"
    try:
        return [await run_concurrent(name, call, c, duration) for c in levels]
    finally:
        await client.close()


async def ensemble(url: str, levels: list[int], duration: float) -> list[Result]:
    from triton_kit.client import AsyncTritonClient

    images = []
    for image in synthetic_images(16, seed=7):
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        images.append(buffer.getvalue())
    async with AsyncTritonClient(f"grpc://{url}") as client:

        async def call(i: int) -> int:
            await client.classify(images[i % len(images)])
            return 1

        return [
            await run_concurrent("(c) Triton ensemble from JPEG", call, c, duration) for c in levels
        ]


def sdk_ratios(results: list[Result]) -> str:
    """The same ratios with the Python SDK as the client (it shares the cores and adds its
    own cost per call)."""
    local = {r.concurrency: r for r in results if r.name.startswith("(a)")}
    core = [r for r in results if r.name.startswith("(b)")]
    first = min(core, key=lambda r: r.concurrency)
    top = max(core, key=lambda r: r.concurrency)
    ratios = (
        first.throughput / local[1].throughput,
        top.throughput / max(local.values(), key=lambda r: r.concurrency).throughput,
    )
    return (
        f"With the SDK as the client instead: {ratios[0]:.2f}x "
        f"at concurrency {first.concurrency}, {ratios[1]:.2f}x "
        f"at concurrency {top.concurrency}."
    )


def render(
    args: argparse.Namespace,
    served: ServedOnnx,
    results: list[Result],
    rows: list[Comparison],
    missing: list[str],
) -> str:
    return "\n".join(
        [
            report_header(
                "ResNet-50 benchmark",
                command="python -m triton_kit.benchmarks.resnet50 (make bench-resnet50)",
                load=f"in-process ONNX Runtime vs Triton, both {served.describe()} (read from "
                f"{MODEL}'s config.pbtxt); client and server on the same 2 cores, shared with "
                f"other jobs; {args.duration:g} s per configuration after a warm-up; weights "
                "as built (speed does not depend on them)",
            ),
            markdown_table(RESULT_HEADERS, [result_row(r) for r in results]),
            "",
            f"## {MODEL} alone: Triton's own onnxruntime backend vs in-process ONNX Runtime",
            "",
            f"Served by {served.backend}; in-process, the same ONNX file and session options "
            f"({served.describe()}). Served side: perf_analyzer (C++ client, one image per "
            f"request, windows of {args.duration / 2:g} s or {model_alone.WINDOW_CALLS} "
            "in-process call times if longer, until windows agree within "
            f"{model_alone.STABILITY} %); in-process, half of its "
            f"{args.duration:g} s before and half after, so drift in other jobs' load hits "
            "both sides. CPU ms/item: this process's CPU time against the tritonserver process "
            "tree's (the client excluded), per item; unlike rates it hardly depends on the "
            "other jobs, so its ratio estimates the served / in-process rate on dedicated cores. "
            "Saturation is the highest concurrency, against the in-process session running "
            "that many images as one batch. Queue and compute per request are Triton's own "
            "statistics over the cell (compute: the execution of the batch the request was "
            "in).",
            "",
            model_alone.comparison_table(rows) if rows else "(perf_analyzer did not run)",
            "",
            *model_alone.verdicts(rows),
            *([f"- not measured: {'; '.join(missing)}"] if missing else []),
            "",
            sdk_ratios(results),
            "",
            "Compare ratios, not absolute times, across runs: the machine is shared and noisy.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    levels = [int(v) for v in args.concurrency.split(",")]
    repository = args.model_repository
    served = ServedOnnx.read(repository, MODEL)
    config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
    with TritonServer(config) as server:
        url = f"{server.config.host}:{server.config.grpc_port}"
        print(f"{MODEL} alone, in-process ({served.describe()}) and perf_analyzer ...", flush=True)
        results, rows, missing = model_alone_rows(url, served, levels, args.duration, args.work_dir)
        print("Triton core model, SDK ...", flush=True)
        results += asyncio.run(core_model(url, levels, args.duration))
        print("Triton ensemble ...", flush=True)
        results += asyncio.run(ensemble(url, levels, args.duration))
    report = render(args, served, results, rows, missing)
    write_keeping_discussion(args.output, report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
