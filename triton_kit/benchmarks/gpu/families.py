"""The families triton_kit/benchmarks/gpu/run.py measures in-process and served (issue 10
first rows)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from triton_kit.benchmarks.gpu.load import in_process, served_load, served_sequential, spec_load
from triton_kit.benchmarks.gpu.models import (
    Spec,
    bert,
    native_name,
    resnet50_uint8,
    write_torch_model,
)
from triton_kit.benchmarks.gpu.settings import Settings

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Family:
    spec: Spec
    make: Callable[[Settings], object]
    max_batch: int
    batches: tuple[int, ...]  # in-process batch sizes
    loads: tuple[tuple[int, int], ...]  # served (batch per request, concurrency)
    # Triton's own pytorch backend at each instance count: the best is chosen by measurement.
    native_instances: tuple[int, ...] = (1, 2, 4)
    # (batch, concurrency) loads sent again through CUDA shared memory: no input gather.
    cuda_shm_loads: tuple[tuple[int, int], ...] = ()


def families(settings: Settings) -> dict[str, Family]:
    """Full size on the GPU; ``--quick`` fewer points; ``--smoke`` tiny shapes and loads."""
    if settings.smoke:
        return _smoke_families()
    seq = {"input_ids": ("INT64", (128,)), "attention_mask": ("INT64", (128,))}
    found = {
        "resnet50": Family(
            Spec("resnet50_u8", {"image": ("UINT8", (224, 224, 3))}, ("logits", 1000), BUCKETS, 4),
            resnet50_uint8,
            256,
            (1, 64, 256),
            ((1, 64), (1, 256), (64, 8)),
            cuda_shm_loads=((1, 256),),
        ),
        "bert-base": Family(
            Spec("bert_base", seq, ("embedding", 768), BUCKETS[:7], 2),
            lambda s: bert(s, 12, 768, 12),
            64,
            (1, 64),
            ((1, 64),),
        ),
        "bert-large": Family(
            Spec("bert_large", seq, ("embedding", 1024), BUCKETS[:7], 2),
            lambda s: bert(s, 24, 1024, 16),
            64,
            (1, 64),
            ((1, 64),),
        ),
    }
    if settings.quick:
        found = {
            name: replace(f, batches=_ends(f.batches), loads=f.loads[:1] + f.loads[2:])
            for name, f in found.items()
        }
    return found


def _ends(values: tuple[int, ...]) -> tuple[int, ...]:
    """The smallest and largest batch: latency and throughput ends of the curve."""
    return tuple(dict.fromkeys((values[0], values[-1])))


def _smoke_families() -> dict[str, Family]:
    seq = {"input_ids": ("INT64", (16,)), "attention_mask": ("INT64", (16,))}
    image = {"image": ("UINT8", (224, 224, 3))}
    small = (1, 2, 4)
    return {
        "resnet50": Family(
            Spec("resnet50_u8", image, ("logits", 1000), small, 1),
            resnet50_uint8,
            4,
            (1, 2),
            ((1, 2), (2, 1)),
            (1,),
        ),
        "bert-base": Family(
            Spec("bert_base", seq, ("embedding", 64), small, 1),
            lambda s: bert(s, 12, 768, 12),
            4,
            (1,),
            ((1, 2),),
            (1,),
        ),
        "bert-large": Family(
            Spec("bert_large", seq, ("embedding", 64), small, 1),
            lambda s: bert(s, 24, 1024, 16),
            4,
            (1,),
            ((1, 2),),
            (1,),
        ),
    }


def prepare_family(name: str, repo: Path, settings: Settings, section: dict) -> None:
    """In-process timings, then the TorchScript the server will load."""
    import torch

    family = families(settings)[name]
    module = family.make(settings).to(settings.device).eval()
    try:
        print(f"== {name}: in-process", flush=True)
        section["in_process"] = in_process(module, family.spec, family.batches, settings)
        write_torch_model(
            repo,
            family.spec,
            module,
            family.max_batch,
            settings,
            family.spec.output[1],
            family.native_instances,
        )
    finally:
        del module
        gc.collect()
        if settings.gpu:
            torch.cuda.empty_cache()


def served_steps(
    name: str, settings: Settings, api_key: str = ""
) -> list[tuple[str, Callable[[str], dict]]]:
    """(row label, measure(url)) for one family's served rows, each guarded by the caller:
    the CUDA-graph python model (``graphs``) and Triton's own backend at each instance count
    (``native<N>``), the same loads for each."""
    family = families(settings)[name]
    spec = family.spec
    models = [("graphs", spec.name)] + [
        (f"native{n}", native_name(spec, n)) for n in family.native_instances
    ]
    steps = []
    for engine, model in models:
        steps.append(
            (
                f"{engine}_sequential_bs1",
                lambda url, m=model: served_sequential(url, spec_load(spec, 1, m), settings),
            )
        )
        for batch, concurrency in family.loads:
            users = settings.concurrency(concurrency)
            steps.append(
                (
                    f"{engine}_bs{batch}_c{users}",
                    lambda url, b=batch, c=users, m=model: served_load(
                        url, spec_load(spec, b, m), c, settings
                    ),
                )
            )
    for engine, model in models if settings.gpu else []:
        for batch, concurrency in family.cuda_shm_loads:
            users = settings.concurrency(concurrency)
            steps.append(
                (
                    f"{engine}_bs{batch}_c{users}_cuda_shm",
                    lambda url, b=batch, c=users, m=model: served_load(
                        url,
                        replace(spec_load(spec, b, m), shm="cuda", api_key=api_key),
                        c,
                        settings,
                    ),
                )
            )
    return steps + perf_analyzer_steps(family, models, settings)


def perf_analyzer_steps(
    family: Family, models: list[tuple[str, str]], settings: Settings
) -> list[tuple[str, Callable[[str], dict]]]:
    """The one-item loads again through perf_analyzer (Triton's C++ client, which leaves the
    CPU to the server), with Triton's own queue/compute split per row: ``pa_<engine>_c<N>``.
    Not in the CPU smoke run (CI need not have perf_analyzer; the BERT benchmark runs it)."""
    if settings.smoke:
        return []
    steps = []
    for engine, model in models:
        for batch, concurrency in family.loads:
            if batch != 1:
                continue
            users = settings.concurrency(concurrency)
            steps.append(
                (
                    f"pa_{engine}_c{users}",
                    lambda url, m=model, c=users: _perf_analyzer(url, m, c, settings),
                )
            )
    return steps


def _perf_analyzer(url: str, model: str, concurrency: int, settings: Settings) -> dict:
    from triton_kit.benchmarks.harness import perf_analyzer

    # Zeros, not random: random INT64 token ids fall outside the embedding table.
    row = perf_analyzer.run(
        url, model, concurrency, settings.seconds, settings.out, input_data="zero"
    )
    if "items_per_s" not in row:
        raise RuntimeError(row.get("error") or row.get("skipped") or str(row))
    return row
