"""ResNet-50: in-process ONNX Runtime vs the same model.onnx served by Triton, in one run.

(a) in-process ONNX Runtime on pre-processed tensors, same intra-op thread budget
as the served model; (b) the core model ``resnet50_model`` through Triton with
dynamic batching; (c) the full ensemble from encoded image bytes through the SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

from benchmarks import RESULTS
from benchmarks.harness.measure import (
    RESULT_HEADERS,
    Result,
    markdown_table,
    report_header,
    result_row,
    run_concurrent,
    run_sync,
)
from build_engines.repository import parse
from build_engines.sample_images import synthetic_images
from python_models.resnet50.image import preprocess
from server import ServerConfig, TritonServer

ROOT = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.resnet50",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per configuration")
    parser.add_argument("--concurrency", default="1,4,16", help="comma-separated levels")
    parser.add_argument("--output", type=Path, default=RESULTS / "resnet50.md")
    return parser.parse_args(argv)


def served_threads(repository: Path) -> int:
    config = parse((repository / "resnet50_model" / "config.pbtxt").read_text())
    value = config.parameters["intra_op_thread_count"].string_value
    return int(value) if value else 0


def in_process(model_path: Path, threads: int, duration: float) -> list[Result]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    pixels = np.stack([preprocess(im) for im in synthetic_images(16, seed=5)])
    results = []
    for batch in (1, 16):
        feed = {"pixel_values": pixels[:batch]}
        results.append(
            run_sync(
                f"(a) in-process ORT, batch {batch}",
                lambda feed=feed, batch=batch: (session.run(None, feed), batch)[1],
                duration,
            )
        )
    return results


async def core_model(url: str, levels: list[int], duration: float) -> list[Result]:
    import tritonclient.grpc.aio as grpcclient

    pixels = np.stack([preprocess(im) for im in synthetic_images(16, seed=6)])
    client = grpcclient.InferenceServerClient(url)
    inputs = []
    for i in range(len(pixels)):
        tensor = grpcclient.InferInput("pixel_values", [1, 3, 224, 224], "FP32")
        tensor.set_data_from_numpy(pixels[i : i + 1])
        inputs.append(tensor)

    async def call(i: int) -> int:
        await client.infer("resnet50_model", [inputs[i % len(inputs)]])
        return 1

    try:
        return [
            await run_concurrent("(b) Triton resnet50_model", call, c, duration) for c in levels
        ]
    finally:
        await client.close()


async def ensemble(url: str, levels: list[int], duration: float) -> list[Result]:
    from client import AsyncTritonClient

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


def render(args: argparse.Namespace, threads: int, results: list[Result]) -> str:
    baseline = max(r.throughput for r in results if r.name.startswith("(a)"))
    core = [r for r in results if r.name.startswith("(b)")]
    saturated = max(core, key=lambda r: r.concurrency)
    ratio = saturated.throughput / baseline
    verdict = "meets" if ratio >= 0.9 else "falls short of"
    return "\n".join(
        [
            report_header(
                "ResNet-50 benchmark",
                command="python -m benchmarks.resnet50 (make bench-resnet50)",
                load=f"in-process ONNX Runtime vs Triton, {threads} intra-op thread(s) each (one "
                "served instance), client and server on the same cores; "
                f"{args.duration:.0f} s per configuration after a 2 s warm-up; weights as built",
            ),
            markdown_table(RESULT_HEADERS, [result_row(r) for r in results]),
            "",
            f"**Triton-served / in-process at saturation: {ratio:.2f}×** "
            f"((b) at concurrency {saturated.concurrency}: {saturated.throughput:.1f} images/s "
            f"vs the best in-process configuration: {baseline:.1f} images/s); "
            f"this {verdict} the 0.9× goal.",
            "",
            "Compare ratios, not absolute times, across runs: the machine is shared and noisy.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    levels = [int(v) for v in args.concurrency.split(",")]
    repository = args.model_repository
    threads = served_threads(repository)
    print(f"in-process ONNX Runtime ({threads} threads) ...", flush=True)
    results = in_process(repository / "resnet50_model" / "1" / "model.onnx", threads, args.duration)
    config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
    with TritonServer(config) as server:
        url = f"{server.config.host}:{server.config.grpc_port}"
        print("Triton core model ...", flush=True)
        results += asyncio.run(core_model(url, levels, args.duration))
        print("Triton ensemble ...", flush=True)
        results += asyncio.run(ensemble(url, levels, args.duration))
    report = render(args, threads, results)
    args.output.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
