"""The served pipeline in one process, without Triton.

The same code does the same work: the served python models' own classes (``resnet50``'s
pre- and post-processors, ``bert``'s tokeniser model, ``nmt``'s search and text), set up
from the built ``config.pbtxt`` as Triton's ``initialize`` sets them up, and the same
TorchScript file the pytorch backend serves, on the device its config names, under the JIT
executor its config names. What is left out is what the server adds: moving tensors between
processes and models, queueing and scheduling.

Batched as the server batches: one call takes ``batch`` one-item requests off a queue of items
(rotating through the pool), as an execute of the front model's dynamic batcher receives them,
at batch 1 and at the largest batch the config allows. Each call runs every stage in turn, on
one thread: the server may overlap stages and instances that this loop runs one after the other.
"""

from __future__ import annotations

import gc
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.benchmarks.gpu.load import stats
from triton_kit.build_engines.repository import parse

Arrays = dict[str, np.ndarray]
WARM_CALLS = 2  # untimed: first-use costs (cuDNN plans, nvJPEG, allocator growth)
MIN_CALLS = 3
VERSION = "1"  # the version every build writes


class Clock:
    """Seconds per named phase, summed over calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] += seconds

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed_fn(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.add(phase, time.perf_counter() - start)

        return timed_fn


@dataclass
class Pipeline:
    """A model's stages, each taking the previous one's per-request results."""

    model: str
    max_batch: int
    request: Callable[[Any], Arrays]  # one item as the one-item request a client sends
    stages: list[tuple[str, Callable[[list], list]]]
    clock: Clock = field(default_factory=Clock)
    notes: dict[str, str] = field(default_factory=dict)  # devices and paths, for the report

    def phases(self) -> dict[str, float]:
        """Seconds per phase: the stages in order, then the phases timed inside them."""
        seconds = self.clock.seconds
        stages = {name: seconds[name] for name, _ in self.stages if name in seconds}
        return {**stages, **{k: v for k, v in seconds.items() if k not in stages}}

    def __call__(self, requests: list[Arrays]) -> list:
        values: list = requests
        for name, stage in self.stages:
            values = self.clock.timed(name, stage)(values)
            failed = next((v for v in values if isinstance(v, Exception)), None)
            if failed is not None:
                raise RuntimeError(f"{self.model}: {name} failed: {failed}") from failed
        return values


def measure(pipeline: Pipeline, items: Sequence[Any], batch: int, seconds: float) -> dict:
    """Calls of ``batch`` requests for ``seconds`` (at least MIN_CALLS) after WARM_CALLS:
    items/s, the call's latency percentiles (ms) and each phase's ms per call."""
    requests = [pipeline.request(item) for item in items]
    position = 0

    def next_batch() -> list[Arrays]:
        nonlocal position
        chosen = [requests[(position + i) % len(requests)] for i in range(batch)]
        position += batch
        return chosen

    for _ in range(WARM_CALLS):
        pipeline(next_batch())
    pipeline.clock.seconds.clear()
    latencies: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(latencies) < MIN_CALLS:
        chosen = next_batch()
        start = time.perf_counter()
        pipeline(chosen)
        latencies.append(time.perf_counter() - start)
    calls = len(latencies)
    return {
        "batch": batch,
        "calls": calls,
        "items_per_s": batch * calls / sum(latencies),
        **stats(latencies),
        "phases_ms": {k: round(v * 1e3 / calls, 3) for k, v in pipeline.phases().items()},
    }


def measure_model(model: str, repo: Path, items: Sequence[Any], seconds: float) -> dict:
    """Batch 1 and the largest batch of ``model``'s pipeline, then its memory freed."""
    pipeline = build_pipeline(model, repo)
    try:
        rows = {
            f"bs{batch}": measure(pipeline, items, batch, seconds)
            for batch in dict.fromkeys((1, pipeline.max_batch))
        }
        return {"max_batch": pipeline.max_batch, "notes": pipeline.notes, **rows}
    finally:
        del pipeline
        release_memory()


def build_pipeline(model: str, repo: Path) -> Pipeline:
    builders = {
        "resnet50": image_pipeline,
        "resnet50_uint8": image_pipeline,
        "bert": bert_pipeline,
        "nmt": nmt_pipeline,
    }
    return builders[model](model, repo)


# -- the served python models, set up without Triton -----------------------------------


def model_config(repo: Path, name: str) -> Any:
    return parse((repo / name / "config.pbtxt").read_text())


def on_gpu(config: Any) -> bool:
    from tritonclient.grpc import model_config_pb2 as mc

    return any(g.kind == mc.ModelInstanceGroup.KIND_GPU for g in config.instance_group)


def local_model(cls: type, repo: Path, name: str, **attributes: Any) -> Any:
    """An instance of the served python model ``cls`` with what PythonModel.initialize gives
    it (from ``name``'s config.pbtxt), then its own ``setup``. Not ``initialize`` itself: it
    needs the stub's pb_utils, and refuses numpy 2 (the GPU host's main environment).
    ``attributes`` are set before ``setup`` (``gpu_device``, as a KIND_GPU instance has)."""
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2 as mc
    from tritonclient.utils import triton_to_np_dtype

    from triton_kit.python_models.common.parameters import ModelParameters

    config = model_config(repo, name)
    as_dict = json_format.MessageToDict(config, preserving_proto_field_name=True)
    model = cls.__new__(cls)
    model.model_config = as_dict
    model.model_name = name
    model.version_dir = repo / name / VERSION
    model.params = ModelParameters.from_config(as_dict)
    model.max_batch_size = config.max_batch_size
    model.input_names = [t.name for t in config.input]
    model.optional_inputs = {t.name for t in config.input if t.optional}
    model.output_dtypes = {
        t.name: np.dtype(triton_to_np_dtype(_wire_dtype(mc.DataType.Name(t.data_type))))
        for t in config.output
    }
    model.profile = None
    for key, value in attributes.items():
        setattr(model, key, value)
    model.setup()
    return model


def _wire_dtype(config_name: str) -> str:
    """``TYPE_FP32`` -> ``FP32``; ``TYPE_STRING`` -> ``BYTES``."""
    name = config_name.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def torchscript(repo: Path, name: str) -> tuple[Callable[[Arrays], np.ndarray], str]:
    """``name``'s TorchScript as its pytorch backend runs it (device and JIT executor from the
    config), host arrays in and out: feeds -> the first output. Returns (run, device)."""
    import torch

    from triton_kit.build_engines.engines.torchscript.config import optimized_execution

    config = model_config(repo, name)
    device = "cuda" if on_gpu(config) else "cpu"
    path = repo / name / VERSION / (config.default_model_filename or "model.pt")
    module = torch.jit.load(str(path), map_location=device).eval()
    optimized = optimized_execution(config)
    names = [t.name for t in config.input]

    def run(feeds: Arrays) -> np.ndarray:
        with torch.jit.optimized_execution(optimized), torch.no_grad():
            inputs = [torch.from_numpy(np.ascontiguousarray(feeds[n])).to(device) for n in names]
            return module(*inputs).float().cpu().numpy()

    return run, device


def release_memory() -> None:
    gc.collect()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# -- the pipelines -----------------------------------------------------------------------


def image_pipeline(model: str, repo: Path) -> Pipeline:
    """``resnet50`` (encoded bytes) or ``resnet50_uint8`` (decoded RGB): its pre-processor's
    ``process_batch`` (nvJPEG + torch on a KIND_GPU instance, PIL otherwise), the
    TorchScript on the whole batch, the top-k post-processor's ``process_batch``."""
    from triton_kit.python_models.resnet50.model import (
        ImagePreprocessor,
        RawImagePreprocessor,
        TopKPostprocessor,
    )

    encoded = model == "resnet50"
    pre_name = f"{model}_preprocess"
    pre_config = model_config(repo, pre_name)
    gpu_device = "cuda:0" if on_gpu(pre_config) else None
    cls = ImagePreprocessor if encoded else RawImagePreprocessor
    pre = local_model(cls, repo, pre_name, gpu_device=gpu_device)
    post = local_model(TopKPostprocessor, repo, "resnet50_postprocess")
    engine, device = torchscript(repo, "resnet50_model")

    def run_engine(results: list[Arrays]) -> list[Arrays]:
        pixels = np.concatenate([r["PIXELS"] for r in results])
        logits = engine({"pixel_values": pixels})
        return [{"LOGITS": row[None]} for row in logits]

    def request(item: Any) -> Arrays:
        if encoded:
            return {"IMAGE": np.array([[item]], dtype=np.object_)}
        return {"IMAGE_UINT8": np.asarray(item)[None]}

    recipe = getattr(pre, "recipe", None)
    return Pipeline(
        model=model,
        max_batch=model_config(repo, model).max_batch_size,
        request=request,
        stages=[
            (pre_name, pre.process_batch),
            ("resnet50_model", run_engine),
            ("resnet50_postprocess", post.process_batch),
        ],
        notes={
            pre_name: f"torch on {recipe.device}" if recipe is not None else "PIL on the CPU",
            "resnet50_model": f"TorchScript on {device}",
        },
    )


def bert_pipeline(model: str, repo: Path) -> Pipeline:
    """``bert``'s ``process_batch`` (decode and tokenise every text, group by length bucket,
    pad), its BLS call to ``bert_model`` replaced by that model's TorchScript in process."""
    from triton_kit.python_models.bert.model import BertEmbeddingModel

    bert = local_model(BertEmbeddingModel, repo, model)
    clock = Clock()
    engine, device = torchscript(repo, bert.encoder_model)
    bert.encode = clock.timed(f"{bert.encoder_model} (inside {model})", engine)
    return Pipeline(
        model=model,
        max_batch=bert.max_batch_size,
        request=lambda text: {"TEXT": np.array([[text.encode()]], dtype=np.object_)},
        stages=[(f"{model} (tokenise, bucket, pad, encode)", bert.process_batch)],
        clock=clock,
        notes={bert.encoder_model: f"TorchScript on {device}", "buckets": str(bert.buckets)},
    )


def nmt_pipeline(model: str, repo: Path) -> Pipeline:
    """``nmt``'s own setup (its step models on the encoder's device) and functions: every
    request's rows parsed and tokenised, one batched beam search, detokenised."""
    from triton_kit.python_models.common.sibling import sibling_device
    from triton_kit.python_models.nmt.decode import generate
    from triton_kit.python_models.nmt.model import NmtModel, parse_rows
    from triton_kit.python_models.nmt.timing import TimedStepModel

    nmt = local_model(NmtModel, repo, model)
    if nmt.engine_search is not None:
        raise RuntimeError(f"{model} was built with --search engine: not this pipeline's")
    clock = Clock()
    runner = TimedStepModel(nmt.runner, lambda phase, s: clock.add(f"  {phase} (inside)", s))

    def translate(requests: list[Arrays]) -> list[Arrays]:
        per_request = [parse_rows(r, nmt.text, nmt.limits) for r in requests]
        ids = iter(generate(runner, [job for jobs in per_request for job in jobs], nmt.settings))
        return [
            {"TRANSLATION": np.array([[nmt.text.decode(next(ids))] for _ in jobs], np.object_)}
            for jobs in per_request
        ]

    encoder = nmt.params.str("encoder_model", "nmt_encoder")
    steps = f"{type(nmt.runner).__name__} on {sibling_device(nmt.version_dir, encoder)}"
    return Pipeline(
        model=model,
        max_batch=nmt.max_batch_size,
        request=lambda text: {"TEXT": np.array([[text.encode()]], dtype=np.object_)},
        stages=[(f"{model} (parse, search, detokenise)", translate)],
        clock=clock,
        notes={"steps": steps, "beam": str(nmt.limits.default_beam_size)},
    )
