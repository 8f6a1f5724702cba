"""benchmarks/gpu.md from the results of benchmarks/gpu.py."""

from __future__ import annotations

ANCHORS = """\
## Published TensorRT anchors (NOT measured here)

- BERT-large batch 1, seq 128: about 1.2 ms on an A100 with TensorRT 8 (NVIDIA's
  BERT-large inference announcement, 2021).
- ResNet-50 MLPerf Inference (offline) on H100: tens of thousands of images/s per GPU
  with TensorRT INT8 (MLPerf v3.x results). Neither TensorRT nor INT8 exists here.
"""


def markdown(results: dict) -> str:
    env = results["env"]
    lines = [
        "# GPU benchmark (issue 10)",
        "",
        "Written by `python -m benchmarks.gpu` (scripts/gpu/bench.sh) on the lent GPU.",
        "All models have **random weights** (speed only). FP16 TorchScript; served by the",
        "embedded Triton through the project's Python-based `pytorch` backend with CUDA graphs",
        "per batch bucket (batches padded up), gRPC clients in separate processes.",
        "",
        *(f"- {k}: {v}" for k, v in env.items()),
        "",
    ]
    for family, data in results.items():
        if family == "env":
            continue
        lines += [
            f"## {family}",
            "",
            "| path | p50 ms | p95 ms | p99 ms | items/s |",
            "|---|---|---|---|---|",
        ]
        for label, row in data.get("in_process", {}).items():
            lines.append(_row(f"in-process {label}", row))
        served = data.get("served", {})
        for label, row in served.items():
            if label == "error":
                continue
            extra = f" ({row.get('errors', 0)} errors)" if row.get("errors") else ""
            lines.append(_row(f"served {label}{extra}", row))
        if "error" in served:
            lines += ["", "Served run failed:", "", "```", served["error"][-1500:], "```"]
        lines += ["", *_ratios(data), ""]
    lines.append(ANCHORS)
    return "\n".join(lines) + "\n"


def _row(label: str, row: dict) -> str:
    return (
        f"| {label} | {row['p50']:.3f} | {row['p95']:.3f} | {row['p99']:.3f} | "
        f"{row['items_per_s']:.0f} |"
    )


def _ratios(data: dict) -> list[str]:
    inproc, served = data.get("in_process", {}), data.get("served", {})
    out = []
    best = max((r["items_per_s"] for k, r in inproc.items() if k.startswith("graph")), default=0)
    for label, row in served.items():
        if label.startswith("bs") and best:
            out.append(
                f"- served {label} / best in-process graph throughput: "
                f"{row['items_per_s'] / best:.2f}x"
            )
    if "graph_bs1" in inproc and "sequential_bs1" in served:
        added = served["sequential_bs1"]["p50"] - inproc["graph_bs1"]["p50"]
        out.append(f"- added batch-1 p50 (served sequential - in-process graph): {added:.3f} ms")
    return out
