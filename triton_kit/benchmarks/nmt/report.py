"""benchmarks/results/nmt.md from the cells of one ``python -m triton_kit.benchmarks.nmt`` run."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

from triton_kit.benchmarks.harness.measure import report_header

IN_PROCESS, TRITON = "in-process ORT", "Triton (gRPC)"
CT2_FP32, CT2_INT8 = "CTranslate2 fp32", "CTranslate2 int8"
IN_PROCESS_INT8, TRITON_INT8 = "in-process ORT int8", "Triton int8 (gRPC)"
IN_ENGINE = "in-process graph"  # the generation graph (BeamSearch in ONNX Runtime) in process
IN_PROCESS_TORCH, TRITON_TORCH = "in-process torch generate", "Triton torch generate (gRPC)"
IN_PROCESS_TORCH_INT8 = "in-process torch generate int8"
TRITON_TORCH_INT8 = "Triton torch generate int8 (gRPC)"
ORDER = (
    IN_PROCESS, IN_ENGINE, CT2_FP32, CT2_INT8, TRITON, IN_PROCESS_INT8, TRITON_INT8,
    IN_PROCESS_TORCH, TRITON_TORCH, IN_PROCESS_TORCH_INT8, TRITON_TORCH_INT8,
)  # fmt: skip
# (served, its in-process twin) per precision, for the ratio and phase columns; served nmt
# runs the generation graph where the build wrote it, and its twin is then that graph
PAIRS = (
    ("", TRITON, IN_PROCESS),
    ("int8 ", TRITON_INT8, IN_PROCESS_INT8),
    ("torch generate ", TRITON_TORCH, IN_PROCESS_TORCH),
    ("torch generate int8 ", TRITON_TORCH_INT8, IN_PROCESS_TORCH_INT8),
)


def pairs_for(present: set[str]) -> tuple[tuple[str, str, str], ...]:
    if IN_ENGINE not in present:
        return PAIRS
    return tuple((label, s, IN_ENGINE if s == TRITON else i) for label, s, i in PAIRS)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}"


def _pivot(cells, table: Callable) -> str:
    by = {(c.engine, c.beam, c.concurrency): c for c in cells}
    keys = list(dict.fromkeys((c.beam, c.concurrency) for c in cells))
    present = {c.engine for c in cells}
    engines = [e for e in ORDER if e in present]
    pairs = [(label, s, i) for label, s, i in pairs_for(present) if s in present]
    headers = ["beam", "conc."] + [f"{e} sent/s" for e in engines]
    for label, _, _ in pairs:
        served = f"Triton {label}"
        headers += [f"{served}/ in-process {label}".strip()]
        headers += [f"{served}/ CT2 fp32", f"{served}/ CT2 int8"]
    rows = []
    for beam, level in keys:
        rate = {e: by[(e, beam, level)].sentences_per_s for e in engines}
        row = [beam, level, *(round(rate[e], 1) for e in engines)]
        for _, served, local in pairs:
            row += [_ratio(rate[served], rate[e]) for e in (local, CT2_FP32, CT2_INT8)]
        rows.append(row)
    return table(headers, rows)


GOAL_LEVELS = (8, 32)


def _goals(cells, table: Callable) -> str:
    by = {(c.engine, c.beam, c.concurrency): c.sentences_per_s for c in cells}
    present = {c.engine for c in cells}
    pairs = [(s, i) for _, s, i in pairs_for(present) if s in present and i in present]
    rows = []
    for beam, level in dict.fromkeys((c.beam, c.concurrency) for c in cells):
        if level not in GOAL_LEVELS or (CT2_INT8, beam, level) not in by:
            continue
        served, local = max(pairs, key=lambda pair: by[(pair[0], beam, level)])
        ct2 = by[(CT2_INT8, beam, level)]
        ratio, engine = by[(served, beam, level)] / ct2, by[(local, beam, level)] / ct2
        serving = by[(served, beam, level)] / by[(local, beam, level)]
        misses = [name for name, r in (("engine", engine), ("serving", serving)) if r < 1]
        verdict = "met" if ratio >= 1 else "missed: " + " and ".join(misses or ["noise"])
        row = [beam, level, served, f"{ratio:.2f}", f"{engine:.2f}", f"{serving:.2f}", verdict]
        rows.append(row)
    headers = ["beam", "conc.", "served", "served / CT2 int8", "engine", "serving", "goal"]
    return table(headers, rows)


def _phases(cells, table: Callable) -> str:
    by = {(c.engine, c.beam, c.concurrency): c for c in cells}
    keys = list(dict.fromkeys((c.beam, c.concurrency) for c in cells))
    present = {c.engine for c in cells}
    pairs = [(label, s, i) for label, s, i in PAIRS if s in present]
    headers = [
        "beam",
        "conc.",
        "graphs",
        "in-proc batch",
        "encoder ms/call",
        "decoder ms/step",
        "search ms/step",
        "decoder / search / encoder share",
        "in-proc ms/sentence",
        "Triton batch",
        "Triton queue ms/req",
        "Triton compute ms/sentence",
        "stub extra ms/sentence",
    ]
    rows = []
    for (beam, level), (label, served_name, local_name) in itertools.product(keys, pairs):
        local = by[(local_name, beam, level)].phases
        served = by[(served_name, beam, level)].phases
        if not local or not served:
            continue
        shares = "/".join(
            f"{local[k]:.0%}"
            for k in ("decoder share", "search share", "encoder share")
            if k in local
        )  # none for one call a batch (the TorchScript search): its steps are inside
        rows.append(
            [
                beam,
                level,
                label.strip() or "fp32",
                round(local["batch"], 1),
                *(_round(local.get(k)) for k in ("encoder ms/call", "decoder ms/step")),
                _round(local.get("search ms/step")),
                shares,
                round(local["ms/sentence"], 2),
                round(served["batch"], 1),
                round(served["queue ms/request"], 2),
                round(served["ms/sentence"], 2),
                round(served["ms/sentence"] - local["ms/sentence"], 2),
            ]
        )
    return table(headers, rows)


def _round(value: float | None) -> float | str:
    return "" if value is None else round(value, 2)


def _all(cells, table: Callable, score: str) -> str:
    headers = ["engine", "beam", "conc.", "sentences", "sentences/s", "tokens/s"]
    headers += ["p50 ms", "p99 ms", score]
    rows = [
        [
            c.engine,
            c.beam,
            c.concurrency,
            len(c.latencies_s),
            round(c.sentences_per_s, 1),
            round(c.tokens_per_s),
            round(c.ms(50), 1),
            round(c.ms(99), 1),
            f"{c.exact:.3f}",
        ]
        for c in cells
    ]
    return table(headers, rows)


def _suite(name: str, cells, table: Callable) -> list[str]:
    large = name == "large"
    title = (
        "Large: random Marian of opus-mt-en-de's shape (speed only)"
        if large
        else "Tiny: the default number model"
    )
    score = "agreement with in-process" if large else "exact match"
    return [
        f"## {title}",
        "",
        "### Sentences/s side by side",
        "",
        _pivot(cells, table),
        "",
        "### The goal: served at least CTranslate2 int8 at c8 and c32",
        "",
        "The faster served precision per cell; `engine` is its in-process twin (the same "
        "search on the same files, no server) over CTranslate2 int8, `serving` the served "
        "rate over that twin. A cell misses through the engine where `engine` < 1, through "
        "serving where `serving` < 1.",
        "",
        _goals(cells, table),
        "",
        "### Where the time goes",
        "",
        "In-process: per decode call (the micro-batch) and per decoder step, from timers "
        "around the StepModel calls; the search is the rest of `generate`. Triton: the `nmt` "
        "model's statistics over the cell; `compute ms/sentence` is the executions' "
        "compute_infer (batch_stats) / requests: tokenising, search and detokenising in the "
        "stub, and the stub's IPC; `stub extra` is that minus the in-process ms/sentence "
        "(the python backend's IPC and the stub process's own speed). Queue is the time a "
        "request waits while the one instance runs an earlier batch (the micro-batcher's "
        "requests wait alike).",
        "",
        _phases(cells, table),
        "",
        "### All measurements",
        "",
        _all(cells, table, score),
        "",
    ]


def render(
    results: dict, *, machine, load, seconds, args: argparse.Namespace, table, date, profiles=()
) -> str:
    start, end = load
    lines = [
        report_header(
            "NMT benchmark: in-process vs Triton vs CTranslate2",
            command=f"python -m triton_kit.benchmarks.nmt --sizes {args.sizes}",
            load=f"load average (1/5/15 min) {start[0]:.2f}/{start[1]:.2f}/{start[2]:.2f} at "
            f"start, {end[0]:.2f}/{end[1]:.2f}/{end[2]:.2f} at the end; {seconds:.0f} s; the "
            "machine is shared, so compare engines within this run only (same sentences, "
            "same thread budget, measured back to back)",
            machine=machine,
            date=date,
        ),
        f"- Budget: every engine gets {args.threads} intra-op thread(s) (written into the "
        "served copies' configs too) and batches of at most 32 requests; closed loops, one "
        "sentence a request; the in-process engines get a micro-batcher that gathers every "
        "queued request into one call (what Triton's dynamic batcher gives the `nmt` model).",
        "- in-process ORT: the served search (triton_kit/python_models/nmt/decode.py: "
        "one vectorised top-k per beam size over every sentence, the decoder run with IO "
        "binding) on ONNX "
        "Runtime sessions of the ONNX files Triton loads. Triton: the `nmt` python model "
        "running the same search on the same files in its stub. CTranslate2 (PyPI "
        "ctranslate2) converted from the same checkpoint, float32 and int8, `patience=2`, "
        "`max_decoding_length` = HF `max_length` - 1.",
        f"- Tiny: the default Marian number model (3+3 layers, d_model 128, 140-piece "
        f"vocabulary), held-out English → French number phrases, exact match against "
        f"num2words; {args.repeats} repeats of the matrix (engine order rotated), median row.",
        f"- Large: a randomly initialised Marian of opus-mt-en-de's shape (6+6 layers, "
        f"d_model 512, 8 heads, FFN 2048, vocabulary {args.large_vocab or 58101}; "
        "triton_kit/benchmarks/nmt/large.py, nothing downloaded), the same English sources; random "
        "weights never pick `</s>`, so every sentence runs to HF `max_length` 32 (31 target "
        f"tokens); {args.large_sentences} sentences per cell, {args.large_repeats} repeat(s). "
        "Speed only: the last column is agreement with the in-process output.",
    ]
    if args.int8_sizes:
        lines.append(
            f"- int8 ({args.int8_sizes}): the same search on the build's `--precision "
            "int8-dynamic` files (ONNX Runtime `quantize_dynamic`: INT8 per-channel MatMul/Gemm "
            "weights, activations quantised at run time), in process and served by a second "
            "Triton server; agreement is with the fp32 in-process output."
        )
    if args.torch_generate_sizes:
        lines.append(
            f"- torch generate ({args.torch_generate_sizes}): the build's `--engine torch "
            "--search engine`, the whole generation in one TorchScript module "
            "(triton_kit/build_engines/families/nmt/torchscript/generate.py: "
            "HF's vectorised beam search, finished sentences leave the batch), fp32: in process "
            "one call per micro-batch, as Triton's "
            "pytorch backend runs it (optimized execution off), and served by Triton's own "
            "pytorch backend, the `nmt` model tokenising and calling it by BLS once per batch."
        )
    if args.torch_int8_sizes:
        lines.append(
            f"- torch generate int8 ({args.torch_int8_sizes}): the same TorchScript search "
            "built with `--precision int8-dynamic` (PyTorch dynamic quantisation of the "
            "steps' Linear layers, CPU only), in process and served the same way."
        )
    lines.append("")
    for name, cells in results.items():
        lines += _suite(name, cells, table)
    if profiles:
        lines += _obstacles(profiles, table)
    return "\n".join(lines)


def _obstacles(profiles, table: Callable) -> list[str]:
    from triton_kit.benchmarks.nmt import profile

    return [
        "## The decoder step inside ONNX Runtime",
        "",
        "The search calls the decoder once per generated token, so a sentence costs its "
        "length in steps. ONNX Runtime's own profiler (`triton_kit/benchmarks/nmt/profile.py`) "
        "on the served `nmt_decoder` file, with the served session options, at a steady-state step "
        "(10 source tokens, a 6-token cache): `step ms` is unprofiled; bookkeeping kernels "
        "are the ops that only describe, slice, cast or move tensors (Shape, Gather, "
        "Unsqueeze, Concat, Reshape, Transpose, ...), which the exported graph carries for "
        "its dynamic shapes; `µs per kernel` is the step time over its kernels.",
        "",
        profile.render(list(profiles), table),
        "",
    ]
