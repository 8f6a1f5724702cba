"""The main job (``make demo``): serve the built models, call each through the SDK, load-test.

Starts the embedded Triton on free loopback ports, calls every built model over
gRPC and HTTP, runs a short load test, prints a results table and stops the server.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from triton_kit.benchmarks.harness.measure import markdown_table
from triton_kit.build_engines.families.sample_images import synthetic_images
from triton_kit.client import TritonClient
from triton_kit.server import ServerConfig, TritonServer
from triton_kit.server.model_backends import backend_table

ROOT = Path(__file__).resolve().parent
LOAD_STEPS = "1,4"  # users per model at each load step
Row = list[object]


def _jpegs(count: int) -> list[bytes]:
    out = []
    for image in synthetic_images(count, seed=11):
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def _timed(fn: Callable[[], object], repeats: int) -> tuple[object, float]:
    result, times = None, []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times) * 1000


def demo_resnet50(client: TritonClient) -> Row:
    image = _jpegs(1)[0]
    result, ms = _timed(lambda: client.classify(image), 5)
    top = ", ".join(f"{p.label.split(',')[0]} {p.score:.2f}" for p in result.predictions[:3])
    return ["resnet50", client.protocol, f"top-3: {top}", round(ms, 1)]


def demo_bert(client: TritonClient) -> Row:
    texts = ["Triton serves models.", "A sentence about GPUs and inference servers."]
    vectors, ms = _timed(lambda: client.embed(texts), 5)
    cosine = float(vectors[0] @ vectors[1])
    return ["bert", client.protocol, f"shape {vectors.shape}, cosine {cosine:.3f}", round(ms, 1)]


def demo_nmt(client: TritonClient) -> Row:
    text = "four hundred and twelve thousand and ninety-seven"
    result, ms = _timed(lambda: client.translate([text], beam_size=4), 3)
    return ["nmt", client.protocol, f"{text!r} -> {result[0]!r}", round(ms, 1)]


DEMOS = {"resnet50": demo_resnet50, "bert": demo_bert, "nmt": demo_nmt}


def built_models(repository: Path) -> list[str]:
    return [name for name in DEMOS if (repository / name / "config.pbtxt").exists()]


def short_load_test(
    server: TritonServer,
    models: list[str],
    step_seconds: float,
    steps: str = LOAD_STEPS,
    out: Path | None = None,
) -> int:
    """Locust at each step's users on each protocol; prints the table, writes the reports."""
    from triton_kit.loadtest.runner import RunConfig, run

    config = RunConfig(
        models=models,
        hosts=[server.grpc_url, server.http_url],
        steps=steps,
        step_time=step_seconds,
        settle_time=min(3.0, step_seconds / 3),
        out=out,
    )
    return run(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python demo.py", description=__doc__)
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=8.0,
        help="seconds per load step (0 skips the load test)",
    )
    parser.add_argument(
        "--steps",
        default=LOAD_STEPS,
        help=f"users per model at each load step (default {LOAD_STEPS}; '1' is the shortest)",
    )
    parser.add_argument(
        "--out", type=Path, help="load-test report folder (default reports/loadtest/<UTC time>)"
    )
    args = parser.parse_args(argv)
    models = built_models(args.model_repository)
    if not models:
        print("no models built: run `make models` first", file=sys.stderr)
        return 1
    config = ServerConfig(
        model_repository=args.model_repository, http_port=0, grpc_port=0, metrics_port=0
    )
    print(f"starting Triton for {', '.join(models)} ...", flush=True)
    with TritonServer(config) as server:
        print(f"ready: {server.grpc_url} and {server.http_url}", flush=True)
        rows: list[Row] = []
        for url in (server.grpc_url, server.http_url):
            with TritonClient(url, timeout=120) as client:
                rows += [DEMOS[name](client) for name in models]
        print("\n## Served by\n")
        print(markdown_table(["model", "backend"], backend_table(args.model_repository)))
        print("\n## Calls through the SDK\n")
        print(markdown_table(["model", "protocol", "result", "median ms"], rows))
        if args.step_seconds > 0:
            print("\n## Short load test (Locust)\n", flush=True)
            return short_load_test(server, models, args.step_seconds, args.steps, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
