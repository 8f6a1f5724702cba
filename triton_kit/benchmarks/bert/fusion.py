"""ONNX Runtime's transformer fusions: the fused BERT graph against the unfused one, in process.

Both graphs of the same build run in this process with the session options the served
encoder uses (read from ``<repository>/bert_model/config.pbtxt``, which Triton's onnxruntime
backend runs for ``bert``: its intra/inter-op threads and ``session.*`` entries,
ORT_ENABLE_ALL), at a few batch sizes and the bucket lengths, every
row full length (no padding). Fused and unfused alternate within each cell over rounds, so
load drift on a shared machine hits both alike. The fused graph is made here from the
build's unfused export (``<work-dir>/bert/model.onnx``) by the build's own step, and checked
against it on the build's verify texts before timing. Writes
benchmarks/results/bert_fusion.md. Run ``python -m triton_kit.build_engines bert`` first.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import markdown_table, report_header, run_sync
from triton_kit.build_engines.engines import fusion
from triton_kit.build_engines.families.bert import (
    CALIBRATION_TEXTS,
    BertOptions,
    example_feeds,
    load_source,
)
from triton_kit.python_models.bert.text import DEFAULT_BUCKETS
from triton_kit.python_models.common.ort_session import SessionSettings, create_session

REPORT = RESULTS / "bert_fusion.md"
GRAPHS = ("unfused", "fused")


@dataclass(frozen=True)
class Settings:
    work_dir: Path = Path("build")
    model_repository: Path = Path("model_repository")
    batch_sizes: tuple[int, ...] = (1, 8, 32)
    lengths: tuple[int, ...] = (16, 64, 128, 256)
    seconds: float = 0.3  # per graph and round
    rounds: int = 4
    output: Path = REPORT


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def parse_args(argv: list[str] | None = None) -> Settings:
    defaults = Settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, default=defaults.work_dir)
    parser.add_argument("--model-repository", type=Path, default=defaults.model_repository)
    parser.add_argument("--batch-sizes", type=_ints, default=defaults.batch_sizes)
    parser.add_argument(
        "--lengths",
        type=_ints,
        default=defaults.lengths,
        help=f"sequence lengths (the build's buckets: {','.join(map(str, DEFAULT_BUCKETS))})",
    )
    parser.add_argument("--seconds", type=float, default=defaults.seconds)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--output", type=Path, default=defaults.output)
    return Settings(**vars(parser.parse_args(argv)))


def served_settings(repository: Path) -> SessionSettings:
    """``bert_model``'s session options, as Triton's onnxruntime backend reads them from its
    config (the ``bert`` stub only calls it through BLS)."""
    from triton_kit.benchmarks.harness.model_alone import ServedOnnx

    return ServedOnnx.read(repository, "bert_model").settings


def feeds(batch: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30000, size=(batch, length), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


def time_cell(sessions: dict, batch: int, length: int, settings: Settings) -> dict[str, float]:
    """p50 ms per call of each graph, fused and unfused alternating over rounds."""
    data = feeds(batch, length)
    latencies: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(settings.rounds):
        for name, session in sessions.items():

            def call(session=session) -> int:
                session.run(None, data)
                return batch

            latencies[name] += run_sync(name, call, settings.seconds, warmup=1).latencies_s
    return {name: float(np.median(values)) * 1000 for name, values in latencies.items()}


def run(settings: Settings, command: str) -> str:
    unfused = settings.work_dir / "bert" / "model.onnx"
    if not unfused.is_file():
        raise SystemExit(
            f"{unfused} not found: run `python -m triton_kit.build_engines bert` first"
        )
    source = load_source(BertOptions(), weights=False)
    session_settings = served_settings(settings.model_repository)
    with tempfile.TemporaryDirectory() as tmp:
        fused = fusion.fuse_and_check(
            unfused,
            Path(tmp) / "model.fused.onnx",
            "bert",
            source.heads,
            source.hidden,
            example_feeds(source, list(CALIBRATION_TEXTS)),  # mixed lengths: the mask matters
            session_settings.intra_op_threads,
        )
        sessions = {
            "unfused": create_session(unfused, session_settings),
            "fused": create_session(fused.path, session_settings),
        }
        rows = []
        for batch in settings.batch_sizes:
            for length in settings.lengths:
                p50 = time_cell(sessions, batch, length, settings)
                rows.append(_row(batch, length, p50))
                print(rows[-1], flush=True)
    return _report(settings, command, fused, session_settings, rows)


def _row(batch: int, length: int, p50: dict[str, float]) -> list[object]:
    seqs = {name: batch / (ms / 1000) for name, ms in p50.items()}
    ratio = p50["unfused"] / p50["fused"]
    return [batch, length, p50["unfused"], p50["fused"], seqs["unfused"], seqs["fused"], ratio]


def _report(settings, command, fused, session_settings, rows) -> str:
    header = report_header(
        "BERT: ONNX Runtime's transformer fusions, fused vs unfused in process",
        command,
        "shared machine: other agents' builds and tests ran beside this one; fused and "
        "unfused alternate within each cell so drift hits both",
    )
    ratios = [row[-1] for row in rows]
    table = markdown_table(
        [
            "batch",
            "length",
            "unfused p50 ms",
            "fused p50 ms",
            "unfused seq/s",
            "fused seq/s",
            "speed-up",
        ],
        rows,
    )
    return (
        f"{header}\n"
        f"all-MiniLM-L6-v2 (`{settings.work_dir}/bert/model.onnx`, the build's FP32 export) "
        "against the same graph through `triton_kit.build_engines.engines.fusion` "
        f"(opt_level {fusion.OPT_LEVEL}): "
        f"{fusion.describe(fused.counts)}; max abs diff on embeddings "
        f"{fused.max_abs_diff:.3g}. Sessions as the served `bert_model` runs them: "
        f"{session_settings.intra_op_threads} intra-op, {session_settings.inter_op_threads} "
        f"inter-op threads, ORT_ENABLE_ALL, CPU provider. Rows full length (no padding); "
        f"median of {settings.rounds} rounds x {settings.seconds} s per graph and cell.\n\n"
        f"{table}\n\n"
        f"Speed-up (unfused p50 / fused p50): median {np.median(ratios):.2f}x, "
        f"range {min(ratios):.2f}-{max(ratios):.2f}x over {len(rows)} cells.\n"
    )


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    command = "python -m triton_kit.benchmarks.bert.fusion " + " ".join(argv or sys.argv[1:])
    text = run(settings, command.strip())
    settings.output.parent.mkdir(parents=True, exist_ok=True)
    settings.output.write_text(text)
    print(f"wrote {settings.output} ({os.path.getsize(settings.output)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
