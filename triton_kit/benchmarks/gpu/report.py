"""gpu.md in the --out of triton_kit/benchmarks/gpu/run.py, from its results (the whole-GPU run;
benchmarks/results/gpu.md itself is the goals run's report: goals_report.py)."""

from __future__ import annotations

from triton_kit.benchmarks.harness.measure import report_header

ANCHORS = """\
## Published TensorRT anchors (NOT measured here)

- BERT-large batch 1, seq 128: about 1.2 ms on an A100 with TensorRT 8 (NVIDIA's
  BERT-large inference announcement, 2021).
- ResNet-50 MLPerf Inference (offline) on H100: tens of thousands of images/s per GPU
  with TensorRT INT8 (MLPerf v3.x results). Neither TensorRT nor INT8 exists here.
"""


TITLES = {
    "input": "resnet50 input: JPEG (nvJPEG + GPU resize) vs decoded UINT8 640x480",
    "shm": "resnet50 UINT8 inputs: inline vs system vs CUDA shared memory",
    "minilm": "MiniLM-L6 on mixed lengths, built with --engine torch, served by the bert model",
}


def header(title: str, command: str, load: str, env: dict) -> str:
    """The report header for a run on the lent GPU, from the run's ``environment``."""
    machine = (
        f"{env.get('gpu', '?')}; Python {env.get('python', '?')}, torch {env.get('torch', '?')}, "
        f"CUDA {env.get('cuda', '?')}, numpy {env.get('numpy', '?')}; "
        f"Triton {env.get('triton', '?')}"
    )
    elapsed = f"; {env['elapsed_s']} s" if "elapsed_s" in env else ""
    return report_header(
        title,
        command=command,
        load=f"{load}; mode {env.get('mode', '?')}{elapsed}",
        machine=machine,
        date=env.get("date"),
        commit=env.get("commit"),
    )


def markdown(results: dict) -> str:
    env = results["env"]
    lines = [
        header(
            "GPU benchmark",
            "python -m triton_kit.benchmarks.gpu",
            "the whole lent GPU; gRPC clients in separate processes",
            env,
        ),
        "All models have **random weights** (speed only). FP16 TorchScript, served by the",
        "embedded Triton two ways: `native<N>` rows through Triton's own pytorch backend",
        "(r24.10, built on that machine; N instances, eager), `graphs` rows through the",
        "CUDA-graph python model (python_models.common.torchscript, graphs per batch bucket,",
        "batches padded up). gRPC clients in separate processes. Each served row is compared",
        "with the same engine in process: native with eager, graphs with graphs.",
        "",
    ]
    for section, data in results.items():
        if section in ("env", "server"):
            continue
        lines += _section(section, data)
    lines += _errors("server", results.get("server", {}))
    lines.append(ANCHORS)
    return "\n".join(lines) + "\n"


def _section(name: str, data: dict) -> list[str]:
    lines = [f"## {TITLES.get(name, name)}", ""]
    if data.get("source"):
        lines += [f"Weights: {data['source']}.", ""]
    lines += ["| path | p50 ms | p95 ms | p99 ms | items/s |", "|---|---|---|---|---|"]
    for label, row in data.get("in_process", {}).items():
        lines.append(_row(f"in-process {label}", row))
    for label, row in data.get("served", {}).items():
        extra = (
            f" ({row['errors']} errors: {row.get('first_error', '')[:80]})"
            if row.get("errors")
            else ""
        )
        lines.append(_row(f"served {label}{extra}", row))
    lines += ["", *_ratios(data), *_compare(name, data.get("served", {})), ""]
    return lines + _errors(name, data)


def _errors(name: str, data: dict) -> list[str]:
    lines = []
    for label, text in data.get("errors", {}).items():
        lines += [f"Step `{name}: {label}` failed:", "", "```", text[-1500:], "```", ""]
    return lines


def _compare(name: str, served: dict) -> list[str]:
    """Throughput of each served row against the section's first comparable one."""
    if name == "input":
        pairs = [(k, k.replace("jpeg", "uint8_640x480")) for k in served if k.startswith("jpeg")]
        return [
            f"- UINT8 / JPEG throughput, {a.removeprefix('jpeg_')}: "
            f"{served[b]['items_per_s'] / served[a]['items_per_s']:.2f}x"
            for a, b in pairs
            if b in served and served[a]["items_per_s"]
        ]
    if name == "shm":
        out = []
        for label, row in served.items():
            base = served.get(label.rsplit("_", 1)[0] + "_inline")
            if base and not label.endswith("_inline") and base["items_per_s"]:
                out.append(f"- {label} / inline: {row['items_per_s'] / base['items_per_s']:.2f}x")
        return out
    return []


def _row(label: str, row: dict) -> str:
    return (
        f"| {label} | {row['p50']:.3f} | {row['p95']:.3f} | {row['p99']:.3f} | "
        f"{row['items_per_s']:.0f} |"
    )


def _ratios(data: dict) -> list[str]:
    """Each served row against the same engine in process: Triton's own backend (eager)
    against eager TorchScript, the CUDA-graph model against graphs; the best native instance
    count per load is the one the section recommends."""
    inproc, served = data.get("in_process", {}), data.get("served", {})
    out = []
    for label, row in served.items():
        mode = _in_process_mode(label)
        best = max((r["items_per_s"] for k, r in inproc.items() if k.startswith(mode)), default=0)
        if "sequential" not in label and best:
            out.append(
                f"- served {label} / best in-process {mode} throughput: "
                f"{row['items_per_s'] / best:.2f}x"
            )
        base = inproc.get(f"{mode}_bs1")
        if "sequential_bs1" in label and base:
            added = row["p50"] - base["p50"]
            out.append(f"- added batch-1 p50 ({label} - in-process {mode} bs1): {added:.3f} ms")
    return out + _best_native(served) + _server_split(served)


def _server_split(served: dict) -> list[str]:
    """Triton's own account of where a perf_analyzer row's time went (per request, ms)."""
    return [
        f"- Triton's split for {label}: queue {s['queue_ms']:.2f}, compute input "
        f"{s['compute_input_ms']:.2f}, infer {s['compute_infer_ms']:.2f}, output "
        f"{s['compute_output_ms']:.2f} ms"
        for label, row in served.items()
        if (s := row.get("server"))
    ]


def _in_process_mode(label: str) -> str:
    return "eager" if label.removeprefix("pa_").startswith("native") else "graph"


def _best_native(served: dict) -> list[str]:
    """The native instance count with the most throughput at each load."""
    by_load: dict[str, list[tuple[float, str]]] = {}
    for label, row in served.items():
        client = "perf_analyzer " if label.startswith("pa_") else ""
        engine, _, load = label.removeprefix("pa_").partition("_")
        if engine.startswith("native") and "sequential" not in load:
            by_load.setdefault(client + load, []).append((row["items_per_s"], engine))
    return [
        f"- best native instance count at {load}: {max(rows)[1].removeprefix('native')} "
        f"({max(rows)[0]:.0f} items/s)"
        for load, rows in by_load.items()
    ]
