"""The TorchScript search on this GPU: in memory vs saved-and-loaded, optimized execution on
vs off (as Triton's pytorch backend runs it), fp32 and fp16, against the held-out references.

    python scripts/gpu/diagnostics/nmt_generate_check.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
from transformers import MarianTokenizer

from triton_kit.benchmarks.nmt.measure import held_out_pairs
from triton_kit.build_engines.families.nmt.export import load_model
from triton_kit.build_engines.families.nmt.torchscript.generate import generate, generation_module
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.transformer import TRANSFORMER, decode_settings
from triton_kit.python_models.nmt.decode import Job


def main() -> None:
    model = load_model(DEFAULT_CHECKPOINT)
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    settings = decode_settings(model)
    pairs = held_out_pairs()[:16]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for dtype in (torch.float32, torch.float16):
        module = generation_module(TRANSFORMER, model, settings, device, dtype)
        path = Path(tempfile.mkdtemp()) / "model.pt"
        module.save(str(path))
        for name, optimized in (("loaded", False), ("in memory", True), ("loaded", True)):
            each = module if name == "in memory" else torch.jit.load(str(path), device)
            for beam in (1, 4):
                jobs = [Job(tokenizer(s)["input_ids"], beam, 64) for s, _ in pairs]
                with torch.jit.optimized_execution(optimized):
                    for _ in range(3):  # the profiling executor specialises on later runs
                        ids = generate(each, jobs)
                _report(
                    f"{dtype} {name:9s} optimized={optimized!s:5s} beam {beam}",
                    ids,
                    pairs,
                    tokenizer,
                )


def _report(label: str, ids: list[list[int]], pairs, tokenizer) -> None:
    """How many translations are the reference's, and the first one."""
    texts = [tokenizer.decode(i, skip_special_tokens=True) for i in ids]
    right = sum(t == r for t, (_, r) in zip(texts, pairs, strict=True))
    print(f"{label}: {right}/{len(pairs)} exact; first ids {ids[0][:12]} {texts[0]!r}", flush=True)


def built(precision: str, pairs, tokenizer, device: str) -> None:
    """The same through the build CLI (scripted fp16, then its fp32 twin, then saved)."""
    from triton_kit.build_engines.cli import build_from_argv

    work = Path(tempfile.mkdtemp())
    argv = ["nmt", "--engine", "torch", "--search", "engine", "--precision", precision]
    argv += ["--verify-sentences", "2", "--instances", "1", "--max-beam-size", "16"]
    argv += ["--output-repository", str(work / "repo"), "--work-dir", str(work / "w")]
    build_from_argv(argv)
    path = work / "repo" / "nmt_generate" / "1" / "model.pt"
    for optimized in (False, True):  # a fresh load each: the first call picks the executor
        loaded = torch.jit.load(str(path), map_location=device)
        jobs = [Job(tokenizer(s)["input_ids"], 4, 64) for s, _ in pairs]
        with torch.jit.optimized_execution(optimized):
            for _ in range(3):
                ids = generate(loaded, jobs)
            start = time.perf_counter()
            for _ in range(5):
                generate(loaded, jobs)
            print(f"    {(time.perf_counter() - start) / 5 * 1e3:.1f} ms a call", flush=True)
        _report(f"built {precision} optimized={optimized!s:5s} beam 4", ids, pairs, tokenizer)


def bisect(device: str) -> None:
    """fp16: the loaded module's encoder and decoder step against the in-memory ones on the
    same feeds, simple executor: which part goes wrong after a save and load."""
    from triton_kit.build_engines.families.nmt.torchscript.steps import decoder_feeds, encoder_feeds

    model = load_model(DEFAULT_CHECKPOINT)
    module = generation_module(TRANSFORMER, model, decode_settings(model), device, torch.float16)
    path = Path(tempfile.mkdtemp()) / "model.pt"
    module.save(str(path))
    loaded = torch.jit.load(str(path), device)

    def placed(feeds):
        tensors = (torch.from_numpy(v).to(device) for v in feeds.values())
        return [t.half() if t.is_floating_point() else t for t in tensors]

    parts = {
        "encoder": (placed(encoder_feeds(3, 11, pad=4)), "encoder"),
        "decoder": (placed(decoder_feeds(model, 5, 9, 3)), "decoder"),
    }
    with torch.jit.optimized_execution(False), torch.inference_mode():
        for name, (feeds, attribute) in parts.items():
            for _ in range(2):
                ours = getattr(module, attribute)(*feeds)
                theirs = getattr(loaded, attribute)(*feeds)
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
                print(
                    f"fp16 {name} output {i}: finite in memory {bool(torch.isfinite(a).all())}, "
                    f"loaded {bool(torch.isfinite(b).all())}, "
                    f"max |diff| {(a.float() - b.float()).abs().nan_to_num(99.0).max().item():.3g}",
                    flush=True,
                )


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["bisect"]:
        bisect("cuda" if torch.cuda.is_available() else "cpu")
        raise SystemExit
    if sys.argv[1:] == ["export-step"]:
        # The same checks with the ONNX export's step (concat form) in the search: it broke
        # at fp16 with its -1e9 mask offset; it now adds mask_bias (finite in fp16).
        from triton_kit.build_engines.families.nmt.export import DecoderStepGraph
        from triton_kit.build_engines.families.nmt.torchscript import generate as nmt_generate

        nmt_generate.MarianDecoderStep = lambda model: DecoderStepGraph(model, concat_cache=True)
        main()
        raise SystemExit
    main()
    tok = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    where = "cuda" if torch.cuda.is_available() else "cpu"
    for p in ("fp16", "fp32"):
        built(p, held_out_pairs()[:16], tok, where)
