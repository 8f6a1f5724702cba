"""NMT beam 4 on the GPU (issue 10): the kit's search on torch step models, CUDA vs CPU.

Run on a GPU host (scripts/gpu/bench.sh .whl OUT benchmarks.gpu_nmt --out OUT)::

    python -m benchmarks.gpu_nmt --out OUT_DIR [--sizes tiny,large] [--sentences 96]

The search is python_models.nmt_decode's, the one the ``nmt`` model serves, running
``build_engines.torch_engine.nmt.step_model`` (encoder and decoder step in-process, the
cache kept on the device) with the micro-batcher of benchmarks/nmt.py at concurrency 1, 8
and 32. ``tiny`` is the kit's trained English→French numbers model; ``large`` a randomly
initialised Marian of opus-mt-en-de's shape (6+6 layers, d_model 512, 58k vocabulary;
speed only). The served ``nmt`` model still runs ONNX Runtime on CPU: a search with
TorchStepModel inside the served model is not wired yet, so these rows are in-process.
Writes gpu_nmt.md and gpu_nmt.json into OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from benchmarks.nmt import DEFAULT_CHECKPOINT, ROOT, step_model_throughput


@dataclass(frozen=True)
class Options:
    out: Path
    sizes: tuple[str, ...]
    sentences: int
    devices: tuple[str, ...]


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the report")
    parser.add_argument("--sizes", default="tiny,large", help="tiny, large or both")
    parser.add_argument("--sentences", type=int, default=96, help="sentences per cell")
    parser.add_argument("--devices", default="cuda,cpu", help="torch devices to compare")
    args = parser.parse_args(argv)
    split = lambda text: tuple(x for x in text.split(",") if x)  # noqa: E731
    return Options(args.out, split(args.sizes), args.sentences, split(args.devices))


def size_setup(size: str, work: Path) -> tuple[Path, Path]:
    """(checkpoint, repository holding its ``nmt`` model) for one size."""
    if size == "tiny":
        return DEFAULT_CHECKPOINT, ROOT / "model_repository"
    from benchmarks import nmt_large

    checkpoint = nmt_large.write_checkpoint(work / "large-checkpoint")
    repository = nmt_large.build_repository(checkpoint, work / "large-repo", work / "w", 8)
    return checkpoint, repository


def run(options: Options) -> dict:
    from build_engines.torch_engine.nmt import step_model

    work = Path(tempfile.mkdtemp(prefix="gpu-nmt-"))
    results: dict = {}
    for size in options.sizes:
        try:
            checkpoint, repository = size_setup(size, work)
        except Exception:
            results[size] = {"error": traceback.format_exc()}
            continue
        for device in options.devices:
            key = f"{size} torch {device}"
            print(f"== {key}", flush=True)
            try:
                cells = step_model_throughput(
                    lambda device=device, checkpoint=checkpoint: step_model(checkpoint, device),
                    repository=repository,
                    beam=4,
                    levels=(1, 8, 32),
                    sentences=options.sentences,
                    checkpoint=checkpoint,
                )
                results[key] = [cell_summary(c) for c in cells]
            except Exception:
                results[key] = {"error": traceback.format_exc()}
            print(key, json.dumps(results[key])[:600], flush=True)
    return results


def cell_summary(cell) -> dict:
    return {
        "concurrency": cell.concurrency,
        "sentences_per_s": round(cell.sentences_per_s, 1),
        "p50_ms": round(1e3 * sorted(cell.latencies_s)[len(cell.latencies_s) // 2], 1),
        "exact": cell.exact,
        "phases": cell.phases,
    }


def markdown(results: dict, env: dict) -> str:
    lines = ["# NMT beam 4 on the GPU: the kit's search on torch step models", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["", "| model / device | concurrency | sentences/s | p50 ms | exact match |"]
    lines += ["|---|---|---|---|---|"]
    for key, cells in results.items():
        if isinstance(cells, dict):
            lines.append(f"| {key} | error: {cells['error'].splitlines()[-1][:80]} | | | |")
            continue
        for c in cells:
            exact = "" if c["exact"] is None else f"{c['exact']:.3f}"
            lines.append(
                f"| {key} | {c['concurrency']} | {c['sentences_per_s']} | {c['p50_ms']} | {exact} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from benchmarks.gpu import environment
    from benchmarks.gpu_settings import Settings

    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results = run(options)
    env = {**environment(Settings(out=options.out)), "wall_s": round(time.time() - started, 1)}
    (options.out / "gpu_nmt.json").write_text(json.dumps({"env": env, **results}, indent=2))
    report = markdown(results, env)
    (options.out / "gpu_nmt.md").write_text(report)
    print(report, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
