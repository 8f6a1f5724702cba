"""Where served one-image ResNet-50 time goes on a GPU host (issue 10's profile).

Run on a GPU host (scripts/gpu/bench.sh .whl OUT triton_kit.benchmarks.gpu.overhead --out OUT)::

    python -m triton_kit.benchmarks.gpu.overhead --out OUT_DIR [--seconds 5] [--processes 8]

Three questions, answered in one run with the same server binary and clients:

1. **The floor of the serving path.** An ``echo`` model on the same python-backend path
   (``triton_kit.python_models.common.base.PythonModel``: ``as_numpy`` in, one response per
   request) that returns zeros without touching the GPU: its sequential p50 is the latency no
   python-based backend can go under, and its throughput at concurrency 64/256 is the most
   requests/s the stub path (or the clients) can carry, whatever the model.
2. **Instances.** The ResNet-50 TorchScript served with 1, 2, 4 and 8 GPU instances (each
   a stub process with its own CUDA context and graphs), one-image requests at
   concurrency 256.
3. **Where the server's time goes.** Triton's own statistics per run: queue, compute input,
   compute infer and compute output per request, and the average batch an execute saw.

Writes ``gpu_overhead.md`` and ``gpu_overhead.json`` into OUT_DIR; ratios are to the
in-process CUDA-graph throughput measured in the same run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from triton_kit.benchmarks.gpu.families import BUCKETS
from triton_kit.benchmarks.gpu.load import in_process, served_load, served_sequential, spec_load
from triton_kit.benchmarks.gpu.models import Spec, resnet50_uint8, write_torch_model
from triton_kit.benchmarks.gpu.report import header
from triton_kit.benchmarks.gpu.run import environment
from triton_kit.benchmarks.gpu.settings import Settings
from triton_kit.benchmarks.harness import perf_analyzer
from triton_kit.benchmarks.harness.tiny_model import write_python_model
from triton_kit.python_models.common.base import PROFILE_DIR_ENV

RESNET = Spec("resnet50_u8", {"image": ("UINT8", (224, 224, 3))}, ("logits", 1000), BUCKETS, 4)
ECHO_MODEL = '''"""Same python-backend path as the pytorch backend; no model behind it."""
import numpy as np

from triton_kit.python_models.common.base import PythonModel


class TritonPythonModel(PythonModel):
    def process_batch(self, batch):
        return [{"logits": np.zeros((b["image"].shape[0], 1000), np.float32)} for b in batch]
'''
ECHO_CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 256
input {{ name: "image" data_type: TYPE_UINT8 dims: [224, 224, 3] }}
output {{ name: "logits" data_type: TYPE_FP32 dims: [1000] }}
instance_group {{ count: {instances} kind: KIND_CPU }}
dynamic_batching {{ max_queue_delay_microseconds: 100 }}
"""


@dataclass(frozen=True)
class Options:
    out: Path
    seconds: float
    processes: int
    instances: tuple[int, ...]
    concurrency: int

    @property
    def settings(self) -> Settings:
        """triton_kit.benchmarks.gpu's settings for the helpers shared with it."""
        return Settings(out=self.out, seconds=self.seconds, processes=self.processes)


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the report")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per load step")
    parser.add_argument("--processes", type=int, default=8, help="client processes")
    parser.add_argument(
        "--instances", default="1,2,4,8", help="ResNet-50 GPU instance counts to compare"
    )
    parser.add_argument("--concurrency", type=int, default=256, help="requests in flight")
    args = parser.parse_args(argv)
    counts = tuple(int(x) for x in args.instances.split(",") if x)
    return Options(args.out, args.seconds, args.processes, counts, args.concurrency)


def server_stats(url: str, model: str) -> dict[str, float]:
    """Triton's per-request averages (ms) and the mean batch of an execute."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    client.close()
    success = stats["inference_stats"]["success"]
    count = int(success.get("count", 0)) or 1
    per_request = {
        part: int(stats["inference_stats"][part].get("ns", 0)) / count / 1e6
        for part in ("queue", "compute_input", "compute_infer", "compute_output")
    }
    executions = int(stats.get("execution_count", 0)) or 1
    return {
        **{f"{k}_ms": round(v, 3) for k, v in per_request.items()},
        "requests": count,
        "mean_batch": round(int(stats.get("inference_count", 0)) / executions, 1),
    }


def measure(url: str, spec: Spec, options: Options, sequential: bool) -> dict:
    """One model's rows; Triton's statistics are read after each so they are per row."""
    rows: dict = {}
    if sequential:
        rows["sequential_bs1"] = served_sequential(url, spec_load(spec, 1), options.settings)
    before = server_stats(url, spec.name)
    load = served_load(url, spec_load(spec, 1), options.concurrency, options.settings)
    after = server_stats(url, spec.name)
    rows[f"bs1_c{options.concurrency}"] = {**load, "server": delta(before, after)}
    key = f"perf_analyzer_bs1_c{options.concurrency}"
    rows[key] = perf_analyzer.run(url, spec.name, options.concurrency, options.seconds, options.out)
    return rows


def delta(before: dict, after: dict) -> dict:
    """Statistics of the requests between two reads (averages weighted by counts)."""
    n0, n1 = before["requests"], after["requests"]
    n = max(n1 - n0, 1)
    out = {
        key: round((after[key] * n1 - before[key] * n0) / n, 3)
        for key in after
        if key.endswith("_ms")
    }
    return {**out, "requests": n1 - n0, "mean_batch_total": after["mean_batch"]}


def run(options: Options) -> dict:
    import torch

    from triton_kit.server.launcher import ServerConfig, TritonServer

    repo = Path(tempfile.mkdtemp(prefix="gpu-overhead-repo-"))
    profiles = options.out / "profiles"
    profiles.mkdir(exist_ok=True)
    os.environ[PROFILE_DIR_ENV] = str(profiles)  # inherited by the server and its stubs
    module = resnet50_uint8(options.settings).cuda().eval()
    print("== in-process", flush=True)
    results: dict = {"in_process": in_process(module, RESNET, (1, 64, 256), options.settings)}
    for count in options.instances:
        spec = replace(RESNET, name=f"resnet50_i{count}", instances=count)
        write_torch_model(repo, spec, module, 256, options.settings, RESNET.output[1])
    del module
    gc.collect()
    torch.cuda.empty_cache()
    for count in (1, 4):
        name = f"echo_i{count}"
        write_python_model(repo, name, ECHO_MODEL, ECHO_CONFIG.format(name=name, instances=count))
    config = ServerConfig(
        model_repository=repo,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=options.out / "tritonserver-overhead.log",
    )
    served: dict = results.setdefault("served", {})
    with TritonServer(config) as server:
        url = server.grpc_url.removeprefix("grpc://")
        names = [f"echo_i{c}" for c in (1, 4)] + [f"resnet50_i{c}" for c in options.instances]
        for name in names:
            print(f"== served {name}", flush=True)
            try:
                served[name] = measure(url, replace(RESNET, name=name), options, True)
            except Exception:
                served[name] = {"error": traceback.format_exc()}
            print(name, json.dumps(served[name]), flush=True)
    results["execute_profile"] = collect_profiles(profiles)
    return results


def collect_profiles(folder: Path) -> dict[str, list[dict]]:
    """Each instance's ms per execute and phase (python_models.common.base.ExecuteProfile)."""
    found: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*.json")):
        found.setdefault(path.stem.rsplit("-", 1)[0], []).append(json.loads(path.read_text()))
    return found


def markdown(results: dict, options: Options) -> str:
    best = max(v["items_per_s"] for k, v in results["in_process"].items() if k.startswith("graph"))
    lines = [
        header(
            "Served one-image ResNet-50 on the GPU: where the time goes",
            "python -m triton_kit.benchmarks.gpu.overhead",
            f"{options.processes} gRPC client processes (asyncio), {options.seconds:g} s per step",
            results["env"],
        ),
        "Random weights, FP16, UINT8 224×224 input. `echo` runs the same python-backend path",
        "with no model.",
        "",
        "| path | p50 ms | p99 ms | req/s | / in-process | server queue ms "
        "| compute in/infer/out ms | mean batch | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, row in results["in_process"].items():
        lines.append(
            f"| in-process {key} | {row['p50']:.3f} | {row['p99']:.3f} | "
            f"{row['items_per_s']:.0f} | {row['items_per_s'] / best:.2f}× | | | | |"
        )
    for name, rows in results["served"].items():
        if "error" in rows:
            lines.append(f"| {name} | error | | | | | | | |")
            continue
        for key, row in rows.items():
            if "p50" not in row:
                lines.append(f"| served {name} {key} | {json.dumps(row)[:80]} | | | | | | | |")
                continue
            server = row.get("server", {})
            parts = "/".join(
                f"{server.get(p + '_ms', 0):.2f}"
                for p in ("compute_input", "compute_infer", "compute_output")
            )
            lines.append(
                f"| served {name} {key} | {row['p50']:.3f} | {row['p99']:.3f} | "
                f"{row['items_per_s']:.0f} | {row['items_per_s'] / best:.2f}× | "
                f"{server.get('queue_ms', float('nan')):.2f} | {parts if server else ''} | "
                f"{server.get('mean_batch_total', '')} | {row.get('errors', 0)} |"
            )
    lines += ["", "## Inside execute (ms per execute, mean over instances)", ""]
    lines += ["| model | executes | requests/execute | phases |", "|---|---|---|---|"]
    for model, instances in results.get("execute_profile", {}).items():
        executes = sum(i["executes"] for i in instances) or 1
        requests = sum(i["requests"] for i in instances)
        phases: dict[str, float] = {}
        for i in instances:
            for phase, ms in i["ms_per_execute"].items():
                phases[phase] = phases.get(phase, 0.0) + ms * i["executes"] / executes
        text = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
        lines.append(f"| {model} | {executes} | {requests / executes:.1f} | {text} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results = {"env": environment(options.settings), **run(options)}
    results["wall_s"] = round(time.time() - started, 1)
    (options.out / "gpu_overhead.json").write_text(json.dumps(results, indent=2) + "\n")
    report = markdown(results, options)
    (options.out / "gpu_overhead.md").write_text(report)
    print(report, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
