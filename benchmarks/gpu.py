"""GPU benchmark (issue 10): in-process PyTorch vs served by the embedded Triton, on one GPU.

Run on a GPU host (scripts/gpu/bench.sh does it on the lent H100)::

    python -m benchmarks.gpu --out OUT_DIR

Models have RANDOM weights (speed only). Each served model is TorchScript behind the
project's Python-based ``pytorch`` backend, with CUDA graphs per batch bucket. Writes
``gpu.md`` (header: GPU, driver, versions) and ``gpu.json`` into OUT_DIR.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Spec:
    """One model to measure: how to build it and what one request looks like."""

    name: str
    inputs: dict[str, tuple[str, tuple[int, ...]]]  # name -> (Triton dtype, inner dims)
    output: tuple[str, int]
    buckets: tuple[int, ...]
    instances: int


def stats(latencies_s: list[float]) -> dict[str, float]:
    ms = np.asarray(latencies_s) * 1e3
    return {f"p{q}": float(np.percentile(ms, q)) for q in (50, 95, 99)}


# -- models ------------------------------------------------------------------------------


def resnet50_uint8():
    """ResNet-50 taking UINT8 NHWC images; normalisation on the GPU, FP16 inside."""
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = ResNetForImageClassification(ResNetConfig(num_labels=1000)).eval()
            mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
            std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
            self.register_buffer("mean", mean)
            self.register_buffer("std", std)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.permute(0, 3, 1, 2).float()
            x = ((x - self.mean) / self.std).half()
            return self.model(pixel_values=x).logits.float()

    net = Net().eval()
    net.model.half()
    return net


def bert_fp16(layers: int, hidden: int, heads: int):
    """BERT encoder, mean-pooled, FP16, random weights."""
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        attn_implementation="sdpa",
    )

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = BertModel(config, add_pooling_layer=False).eval().half()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden_states = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)
            return ((hidden_states * mask).sum(1) / mask.sum(1)).float()

    return Net().eval()


def example(spec: Spec, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    arrays = {}
    for name, (dtype, dims) in spec.inputs.items():
        if dtype == "UINT8":
            arrays[name] = rng.integers(0, 256, (batch, *dims), dtype=np.uint8)
        elif name == "attention_mask":
            arrays[name] = np.ones((batch, *dims), dtype=np.int64)
        else:
            arrays[name] = rng.integers(1000, 2000, (batch, *dims), dtype=np.int64)
    return arrays


# -- in-process --------------------------------------------------------------------------


def in_process(module, spec: Spec, batches: tuple[int, ...], seconds: float) -> dict:
    """Eager and CUDA-graph timings, host input copy and output copy included."""
    import torch

    torch.backends.cudnn.benchmark = False
    rng = np.random.default_rng(0)
    results = {}
    for batch in batches:
        host = {n: torch.from_numpy(a).pin_memory() for n, a in example(spec, batch, rng).items()}
        static = {n: t.cuda() for n, t in host.items()}

        def eager(host=host):
            with torch.inference_mode():
                inputs = [t.cuda(non_blocking=True) for t in host.values()]
                return module(*inputs).cpu()

        for _ in range(3):
            eager()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.inference_mode():
            for _ in range(3):
                module(*static.values())
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.inference_mode():
            out = module(*static.values())

        def graphed(host=host, static=static, graph=graph, out=out):
            for n, t in host.items():
                static[n].copy_(t, non_blocking=True)
            graph.replay()
            return out.cpu()

        for label, fn in (("eager", eager), ("graph", graphed)):
            lat = timed_loop(fn, seconds)
            results[f"{label}_bs{batch}"] = {
                **stats(lat),
                "items_per_s": batch * len(lat) / sum(lat),
            }
        del graph
    return results


def timed_loop(fn, seconds: float, limit: int = 20000) -> list[float]:
    fn()
    lat: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and len(lat) < limit:
        start = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - start)
    return lat


# -- served ------------------------------------------------------------------------------


def write_repository(repo: Path, spec: Spec, module, max_batch: int) -> None:
    import torch

    from build_engines.repository import Tensor, render
    from build_engines.torch_engine import TorchConfigOptions, torch_model_config

    rng = np.random.default_rng(0)
    ex = tuple(torch.from_numpy(a).cuda() for a in example(spec, 2, rng).values())
    with torch.no_grad():
        traced = torch.jit.trace(module, ex, check_trace=False)
    version = repo / spec.name / "1"
    version.mkdir(parents=True, exist_ok=True)
    traced.save(str(version / "model.pt"))
    options = TorchConfigOptions(
        max_batch_size=max_batch,
        gpu=True,
        instances=spec.instances,
        precision="fp16",
        queue_delay_us=100,
        graph_batch_sizes=spec.buckets,
        graph_dims={n: d for n, (_, d) in spec.inputs.items()},
    )
    config = torch_model_config(
        spec.name,
        [Tensor(n, t, d) for n, (t, d) in spec.inputs.items()],
        [Tensor(spec.output[0], "FP32", (spec.output[1],))],
        options,
    )
    (repo / spec.name / "config.pbtxt").write_text(render(config))


def _worker(args) -> tuple[int, list[float]]:
    url, spec, batch, concurrency, seconds = args
    return asyncio.run(_worker_async(url, spec, batch, concurrency, seconds))


async def _worker_async(url, spec: Spec, batch, concurrency, seconds):
    import tritonclient.grpc.aio as grpcclient
    from tritonclient.utils import np_to_triton_dtype

    client = grpcclient.InferenceServerClient(url)
    arrays = example(spec, batch, np.random.default_rng(1))
    inputs = []
    for name, array in arrays.items():
        tensor = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    outputs = [grpcclient.InferRequestedOutput(spec.output[0])]
    latencies: list[float] = []
    errors = 0
    end = time.perf_counter() + seconds

    async def user():
        nonlocal errors
        while time.perf_counter() < end:
            start = time.perf_counter()
            try:
                result = await client.infer(spec.name, inputs, outputs=outputs)
                assert result.as_numpy(spec.output[0]).shape == (batch, spec.output[1])
                latencies.append(time.perf_counter() - start)
            except Exception:
                errors += 1

    await asyncio.gather(*(user() for _ in range(concurrency)))
    await client.close()
    return errors, latencies


def served_load(url, spec, batch, concurrency, seconds, processes) -> dict:
    processes = max(1, min(processes, concurrency))
    share = [concurrency // processes + (i < concurrency % processes) for i in range(processes)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes) as pool:
        parts = pool.map(_worker, [(url, spec, batch, c, seconds) for c in share])
    latencies = [x for _, lat in parts for x in lat]
    errors = sum(e for e, _ in parts)
    return {
        **stats(latencies or [float("nan")]),
        "items_per_s": batch * len(latencies) / seconds,
        "requests": len(latencies),
        "errors": errors,
        "batch": batch,
        "concurrency": concurrency,
    }


def served_sequential(url, spec, count=300) -> dict:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import np_to_triton_dtype

    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    arrays = example(spec, 1, np.random.default_rng(1))
    inputs = []
    for name, array in arrays.items():
        tensor = grpcclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)

    def call():
        client.infer(spec.name, inputs)

    lat = timed_loop(call, 5.0, count)
    return {**stats(lat), "items_per_s": len(lat) / sum(lat)}


# -- report ------------------------------------------------------------------------------


def environment() -> dict[str, str]:
    import torch

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "gpu": smi,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "numpy": np.__version__,
        "triton": "2.51.0 (nvidia-pytriton 0.7.0 binary), python-based pytorch backend",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--processes", type=int, default=8, help="client processes")
    parser.add_argument("--families", default="resnet50,bert-base,bert-large")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from benchmarks.gpu_families import run_all

    results = {"env": environment(), **run_all(args)}
    (args.out / "gpu.json").write_text(json.dumps(results, indent=2) + "\n")
    from benchmarks.gpu_report import markdown

    (args.out / "gpu.md").write_text(markdown(results))
    print(markdown(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
