"""fp16 TorchScript steps and search under each JIT executor setting Triton's pytorch backend
can pick (DISABLE_OPTIMIZED_EXECUTION, ENABLE_JIT_PROFILING): where non-finite values
appear, exact match and time a call. One process per setting (the first call picks it).

    python scripts/gpu/diagnostics/nmt_fp16_executors.py            # every setting
    python scripts/gpu/diagnostics/nmt_fp16_executors.py SETTING    # one, in this process
"""

from __future__ import annotations

import subprocess
import sys
import time

import torch

SETTINGS = {  # name: (optimized execution, profiling executor)
    "simple": (False, True),
    "profiling": (True, True),
    "legacy": (True, False),
}


def one(setting: str) -> None:
    from transformers import MarianTokenizer

    from benchmarks.nmt.run import held_out_pairs
    from build_engines.nmt.export import load_model
    from build_engines.nmt.pipeline import decode_settings
    from build_engines.nmt.train import DEFAULT_CHECKPOINT
    from build_engines.torch_engine.nmt_generate import (
        generate,
        generation_module,
        traced_steps,
    )
    from python_models.nmt.decode import Job

    optimized, profiling = SETTINGS[setting]
    torch._C._jit_set_profiling_executor(profiling)
    torch._C._jit_set_profiling_mode(profiling)
    model = load_model(DEFAULT_CHECKPOINT)
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    pairs = held_out_pairs()[:16]
    encoder, _ = traced_steps(model, "cuda", torch.float16)
    batch = tokenizer([s for s, _ in pairs[:4]], return_tensors="pt", padding=True).to("cuda")
    with torch.jit.optimized_execution(optimized), torch.inference_mode():
        for _ in range(3):
            hidden, cross = encoder(batch["input_ids"], batch["attention_mask"])
    print(
        f"{setting}: encoder finite {bool(torch.isfinite(hidden).all())}, "
        f"max |h| {hidden.abs().max().item():.1f}, "
        f"cross finite {bool(torch.isfinite(cross).all())}",
        flush=True,
    )
    module = generation_module(model, decode_settings(model), "cuda", torch.float16)
    jobs = [Job(tokenizer(s)["input_ids"], 4, 64) for s, _ in pairs]
    with torch.jit.optimized_execution(optimized):
        for _ in range(3):
            ids = generate(module, jobs)
        start = time.perf_counter()
        for _ in range(5):
            generate(module, jobs)
        ms = (time.perf_counter() - start) / 5 * 1e3
    texts = [tokenizer.decode(i, skip_special_tokens=True) for i in ids]
    right = sum(t == r for t, (_, r) in zip(texts, pairs, strict=True))
    print(f"{setting}: beam 4 {right}/16 exact, {ms:.1f} ms a call of 16", flush=True)
    # a second shape set: the profiling executor re-specialises on new shapes
    jobs = [Job(tokenizer(s)["input_ids"], 4, 64) for s, _ in held_out_pairs()[16:48]]
    with torch.jit.optimized_execution(optimized):
        start = time.perf_counter()
        generate(module, jobs)
        ms = 1e3 * (time.perf_counter() - start)
        print(f"{setting}: first call on 32 new sentences {ms:.1f} ms", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one(sys.argv[1])
    else:
        for name in SETTINGS:
            subprocess.run([sys.executable, __file__, name], check=False, timeout=300)
