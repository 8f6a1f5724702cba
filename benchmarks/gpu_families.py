"""What benchmarks/gpu.py measures for each family, in one run."""

from __future__ import annotations

import argparse
import gc
import tempfile
import traceback
from pathlib import Path

from benchmarks.gpu import (
    BUCKETS,
    Spec,
    bert_fp16,
    in_process,
    resnet50_uint8,
    served_load,
    served_sequential,
    write_repository,
)

FAMILIES = {
    "resnet50": (
        Spec("resnet50_u8", {"image": ("UINT8", (224, 224, 3))}, ("logits", 1000), BUCKETS, 4),
        resnet50_uint8,
        256,
        (1, 64, 256),
        ((1, 64), (1, 256), (64, 8)),
    ),
    "bert-base": (
        Spec(
            "bert_base",
            {"input_ids": ("INT64", (128,)), "attention_mask": ("INT64", (128,))},
            ("embedding", 768),
            BUCKETS[:7],
            2,
        ),
        lambda: bert_fp16(12, 768, 12),
        64,
        (1, 64),
        ((1, 64),),
    ),
    "bert-large": (
        Spec(
            "bert_large",
            {"input_ids": ("INT64", (128,)), "attention_mask": ("INT64", (128,))},
            ("embedding", 1024),
            BUCKETS[:7],
            2,
        ),
        lambda: bert_fp16(24, 1024, 16),
        64,
        (1, 64),
        ((1, 64),),
    ),
}


def run_all(args: argparse.Namespace) -> dict:
    import torch

    from server.launcher import ServerConfig, TritonServer

    chosen = [f for f in args.families.split(",") if f]
    repo = Path(tempfile.mkdtemp(prefix="gpu-bench-repo-"))
    results: dict = {}
    for family in chosen:
        spec, make, max_batch, batches, _ = FAMILIES[family]
        module = make().cuda().eval()
        print(f"== {family}: in-process", flush=True)
        results[family] = {"in_process": in_process(module, spec, batches, args.seconds)}
        write_repository(repo, spec, module, max_batch)
        del module
        gc.collect()
        torch.cuda.empty_cache()
    log = args.out / "tritonserver.log"
    config = ServerConfig(
        model_repository=repo, http_port=0, grpc_port=0, metrics_port=0, log_file=log
    )
    with TritonServer(config) as server:
        url = server.grpc_url.removeprefix("grpc://")
        for family in chosen:
            spec, _, _, _, loads = FAMILIES[family]
            print(f"== {family}: served", flush=True)
            served = results[family]["served"] = {}
            try:
                served["sequential_bs1"] = served_sequential(url, spec)
                for batch, concurrency in loads:
                    served[f"bs{batch}_c{concurrency}"] = served_load(
                        url, spec, batch, concurrency, args.seconds, args.processes
                    )
                    print(
                        family, batch, concurrency, served[f"bs{batch}_c{concurrency}"], flush=True
                    )
            except Exception:
                served["error"] = traceback.format_exc()
                print(served["error"], flush=True)
    return results
