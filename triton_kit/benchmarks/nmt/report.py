"""benchmarks/results/nmt.md from the cells of one ``python -m triton_kit.benchmarks.nmt`` run."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

from triton_kit.benchmarks.harness.measure import report_header
from triton_kit.benchmarks.nmt.measure import MAX_BATCH

IN_PROCESS, TRITON = "in-process ORT", "Triton (gRPC)"
CT2_FP32, CT2_INT8 = "CTranslate2 fp32", "CTranslate2 int8"
IN_PROCESS_INT8, TRITON_INT8 = "in-process ORT int8", "Triton int8 (gRPC)"
IN_ENGINE = "in-process graph"  # the generation graph (BeamSearch in ONNX Runtime) in process
TRITON_GRAPH = "Triton graph (gRPC)"  # the same graph served by Triton's onnxruntime backend
IN_PROCESS_TORCH, TRITON_TORCH = "in-process torch generate", "Triton torch generate (gRPC)"
IN_PROCESS_TORCH_INT8 = "in-process torch generate int8"
TRITON_TORCH_INT8 = "Triton torch generate int8 (gRPC)"
TRITON_CT2 = "Triton ctranslate2 (gRPC)"  # nmt_ct2 in the kit's ctranslate2 backend
TRITON_CT2_DIRECT = "nmt_ct2 direct (gRPC)"  # the same server, clients calling nmt_ct2 itself
TRITON_CT2_TEXT = "Triton ct2 text (gRPC)"  # --ct2-text: nmt is the backend's text model
TRITON_CT2_TEXT_RAW = "ct2 text raw gRPC"  # the same server, bare tritonclient clients
ORDER = (
    IN_PROCESS, CT2_FP32, CT2_INT8, TRITON, IN_ENGINE, TRITON_GRAPH, IN_PROCESS_INT8, TRITON_INT8,
    IN_PROCESS_TORCH, TRITON_TORCH, IN_PROCESS_TORCH_INT8, TRITON_TORCH_INT8, TRITON_CT2,
    TRITON_CT2_DIRECT, TRITON_CT2_TEXT, TRITON_CT2_TEXT_RAW,
)  # fmt: skip
# (label, served, its in-process twin) per build, for the ratio and phase columns
PAIRS = (
    ("", TRITON, IN_PROCESS),
    ("graph ", TRITON_GRAPH, IN_ENGINE),
    ("int8 ", TRITON_INT8, IN_PROCESS_INT8),
    ("torch generate ", TRITON_TORCH, IN_PROCESS_TORCH),
    ("torch generate int8 ", TRITON_TORCH_INT8, IN_PROCESS_TORCH_INT8),
    # in process, the same library runs the same conversion of the checkpoint at int8
    ("ctranslate2 ", TRITON_CT2, CT2_INT8),
    ("ct2 text ", TRITON_CT2_TEXT, CT2_INT8),
)
# What each engine is, for the report's list of engines (only those measured are listed).
ENGINE_MEANINGS = {
    IN_PROCESS: "the Python search (triton_kit/python_models/nmt/decode.py: one vectorised "
    "top-k per beam size over every sentence, the decoder run with IO binding) on ONNX Runtime "
    "sessions of the ONNX step files Triton loads, in this process",
    TRITON: "the `--engine onnxruntime --search python` build served (the default before "
    "CTranslate2): the `nmt` python model running that same Python search on the same files "
    "with ONNX Runtime inside its stub",
    CT2_FP32: "CTranslate2 (PyPI ctranslate2) converted from the same checkpoint, float32, "
    "`patience=2`, `max_decoding_length` = HF `max_length` - 1",
    CT2_INT8: "the same CTranslate2 model at int8",
    IN_ENGINE: "the `--search engine` build's `nmt_generate` (ONNX Runtime's BeamSearch operator "
    "in a Loop over the batch's rows, one sentence at a time inside the engine) in an ONNX "
    "Runtime session in this process, one call per micro-batch",
    TRITON_GRAPH: "that graph served by Triton's own onnxruntime backend; the `nmt` python model "
    "tokenises, pads and calls it by BLS once per batch, and runs no engine in its stub",
    IN_PROCESS_INT8: "the Python search on the build's `--precision int8-dynamic` ONNX files "
    "(ONNX Runtime `quantize_dynamic`), in this process",
    TRITON_INT8: "the same int8 files served as the default build is",
    IN_PROCESS_TORCH: "the `--engine torch --search engine` build's `nmt_generate`, the whole "
    "generation in one frozen TorchScript module (triton_kit/build_engines/families/nmt/"
    "torchscript/generate.py: HF's vectorised beam search, finished sentences leave the batch, "
    "over the search's own encoder and KV-cached decoder step, search_encoder.py and "
    "cached_step.py), fp32, in this process one call per micro-batch, as Triton's pytorch "
    "backend runs it (optimized execution off)",
    TRITON_TORCH: "that module served by Triton's own pytorch backend; the `nmt` python model "
    "tokenises and calls it by BLS once per beam size of its batch (a batch of one beam size "
    "answered in execute's return, every sentence at once), and runs no engine",
    IN_PROCESS_TORCH_INT8: "the TorchScript search built with `--precision int8-dynamic` "
    "(PyTorch dynamic quantisation of the steps' Linear layers), in this process",
    TRITON_TORCH_INT8: "that int8 module served the same way",
    TRITON_CT2: "the `--engine ctranslate2 --no-ct2-text` build (nmt's engine): the same "
    "checkpoint converted by CTranslate2 at int8 (`nmt_ct2`), served natively by the kit's own C++ "
    "backend `ctranslate2` (the ctranslate2 wheel's libctranslate2, one batched translate per "
    "beam size and limit of an execute on Triton's instance thread, `intra_threads` = the "
    "budget); the `nmt` python model tokenises, sends its batch's ids in ONE BLS call and "
    "detokenises, and runs no engine. Its in-process twin is `CTranslate2 int8`",
    TRITON_CT2_DIRECT: "the same server as `Triton ctranslate2 (gRPC)`, its clients calling "
    "`nmt_ct2` itself (token ids in and out, sentencepiece in the client thread, one sentence "
    "a request): the native backend without the `nmt` python model in front",
    TRITON_CT2_TEXT: "the `--engine ctranslate2 --ct2-text` build (nmt's default): the same int8 "
    "conversion served as `nmt` itself by the same C++ backend in its text mode (TEXT in, "
    "TRANSLATION out, sentencepiece tokenisation and detokenisation inside the backend), its own "
    "server, the kit's SDK clients as for `Triton (gRPC)`: no python model on the path. Its "
    "in-process twin is `CTranslate2 int8`",
    TRITON_CT2_TEXT_RAW: "the same server as `Triton ct2 text (gRPC)`, its clients bare "
    "`tritonclient.grpc` (TEXT and BEAM_SIZE in, TRANSLATION out, one sentence a request): the "
    "client stack of `nmt_ct2 direct (gRPC)`, so the two differ by the server's work alone",
}
# served CT2 (nmt's engine since issue 31, here with the python nmt in front: --no-ct2-text)
# against the served Python search, the default before, where both were measured
CT2_VS_DEFAULT = "Triton ctranslate2 / Triton"
CT2_DIRECT_VS_INT8 = "nmt_ct2 direct / CT2 int8"
CT2_TEXT_RAW_VS_INT8 = "ct2 text raw / CT2 int8"
CT2_TEXT_RAW_VS_DIRECT = "ct2 text raw / nmt_ct2 direct"


def defined(headers: list[str], meanings: dict[str, str]) -> str:
    """One line per column: the table's legend. A column with no meaning is an error, so no
    report can carry an undefined column."""
    missing = [h for h in headers if h not in meanings]
    if missing:
        raise KeyError(f"columns without a definition: {missing}")
    return "\n".join(f"- `{h}`: {meanings[h]}" for h in headers)


def _pivot_meanings(engines: list[str], pairs) -> dict[str, str]:
    meanings = {"beam": "beam size (1 is greedy)", "conc.": "concurrent closed-loop clients"}
    meanings.update({f"{e} sent/s": f"sentences/s of {e} in this cell" for e in engines})
    for label, served, local in pairs:
        name = f"Triton {label}".strip()
        meanings[f"{name} / in-process {label}".strip()] = f"{served} sent/s over {local} sent/s"
        for ct2 in (CT2_FP32, CT2_INT8):
            suffix = ct2.split()[-1]
            meanings[f"{name} / CT2 {suffix}"] = f"{served} sent/s over {ct2} sent/s"
    return meanings


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}"


def _pivot(cells, table: Callable) -> str:
    by = {(c.engine, c.beam, c.concurrency): c for c in cells}
    keys = list(dict.fromkeys((c.beam, c.concurrency) for c in cells))
    present = {c.engine for c in cells}
    engines = [e for e in ORDER if e in present]
    pairs = [(label, s, i) for label, s, i in PAIRS if s in present and i in present]
    headers = ["beam", "conc."] + [f"{e} sent/s" for e in engines]
    for label, _, _ in pairs:
        served = f"Triton {label}".strip()
        headers += [f"{served} / in-process {label}".strip()]
        headers += [f"{served} / CT2 fp32", f"{served} / CT2 int8"]
    versus_default = TRITON_CT2 in present and TRITON in present
    if versus_default:
        headers.append(CT2_VS_DEFAULT)
    direct = TRITON_CT2_DIRECT in present and CT2_INT8 in present
    if direct:
        headers.append(CT2_DIRECT_VS_INT8)
    raw = TRITON_CT2_TEXT_RAW in present and CT2_INT8 in present
    if raw:
        headers.append(CT2_TEXT_RAW_VS_INT8)
    raw_direct = TRITON_CT2_TEXT_RAW in present and TRITON_CT2_DIRECT in present
    if raw_direct:
        headers.append(CT2_TEXT_RAW_VS_DIRECT)
    rows = []
    for beam, level in keys:
        rate = {e: by[(e, beam, level)].sentences_per_s for e in engines}
        row = [beam, level, *(round(rate[e], 1) for e in engines)]
        for _, served, local in pairs:
            row += [_ratio(rate[served], rate[e]) for e in (local, CT2_FP32, CT2_INT8)]
        if versus_default:
            row.append(_ratio(rate[TRITON_CT2], rate[TRITON]))
        if direct:
            row.append(_ratio(rate[TRITON_CT2_DIRECT], rate[CT2_INT8]))
        if raw:
            row.append(_ratio(rate[TRITON_CT2_TEXT_RAW], rate[CT2_INT8]))
        if raw_direct:
            row.append(_ratio(rate[TRITON_CT2_TEXT_RAW], rate[TRITON_CT2_DIRECT]))
        rows.append(row)
    meanings = _pivot_meanings(engines, pairs)
    meanings[CT2_VS_DEFAULT] = (
        f"{TRITON_CT2} sent/s over {TRITON} sent/s (the Python search, the default nmt before "
        "CTranslate2's)"
    )
    meanings[CT2_DIRECT_VS_INT8] = f"{TRITON_CT2_DIRECT} sent/s over {CT2_INT8} sent/s"
    meanings[CT2_TEXT_RAW_VS_INT8] = f"{TRITON_CT2_TEXT_RAW} sent/s over {CT2_INT8} sent/s"
    meanings[CT2_TEXT_RAW_VS_DIRECT] = (
        f"{TRITON_CT2_TEXT_RAW} sent/s over {TRITON_CT2_DIRECT} sent/s"
    )
    return table(headers, rows) + "\n\n" + defined(headers, meanings)


GOAL_LEVELS = (8, 32)


def _goals(cells, table: Callable) -> str:
    by = {(c.engine, c.beam, c.concurrency): c.sentences_per_s for c in cells}
    present = {c.engine for c in cells}
    pairs = [(s, i) for _, s, i in PAIRS if s in present and i in present]
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
    meanings = {
        "beam": "beam size",
        "conc.": "concurrent clients",
        "served": "the fastest served engine in this cell",
        "served / CT2 int8": "its sent/s over CTranslate2 int8's",
        "engine": "its in-process twin's sent/s over CTranslate2 int8's",
        "serving": "its sent/s over its in-process twin's",
        "goal": "met where `served / CT2 int8` >= 1; else which ratio is below 1",
    }
    return table(headers, rows) + "\n\n" + defined(headers, meanings)


# served with no engine in the nmt stub
ENGINE_SEARCHES = (TRITON_GRAPH, TRITON_TORCH, TRITON_CT2)


def _engine_default(cells, table: Callable) -> str:
    """Issue 31's rule: the search inside a served engine becomes the default build once it is
    at least as fast as the served Python search (``Triton (gRPC)``, the default before) in
    every measured cell (CTranslate2's met it: benchmarks/results/nmt_ctranslate2.md)."""
    by = {(c.engine, c.beam, c.concurrency): c.sentences_per_s for c in cells}
    present = [e for e in ENGINE_SEARCHES if any(c.engine == e for c in cells)]
    if not present or not any(c.engine == TRITON for c in cells):
        return ""
    headers = ["beam", "conc.", f"{TRITON} sent/s"]
    headers += [f"{e} / {TRITON}" for e in present] + ["as fast"]
    rows, verdicts = [], []
    for beam, level in dict.fromkeys((c.beam, c.concurrency) for c in cells):
        today = by[(TRITON, beam, level)]
        ratios = [by[(e, beam, level)] / today for e in present]
        verdicts.append(max(ratios) >= 1)
        rows.append([beam, level, round(today, 1), *(f"{r:.2f}" for r in ratios)])
        rows[-1].append("yes" if verdicts[-1] else "no")
    meanings = {
        "beam": "beam size",
        "conc.": "concurrent clients",
        f"{TRITON} sent/s": "the Python search served (`--engine onnxruntime --search python`, "
        "the default build before CTranslate2's)",
        "as fast": "whether some engine search is at least as fast as the Python search here",
    }
    meanings.update({f"{e} / {TRITON}": f"{e} sent/s over the Python search's" for e in present})
    decision = (
        "**Every cell as fast: an engine search meets issue 31's rule for the default build.**"
        if all(verdicts)
        else "**Not as fast in every cell: by issue 31's rule the Python search stays ahead.**"
    )
    return "\n\n".join([table(headers, rows), defined(headers, meanings), decision])


def _phases(cells, table: Callable) -> str:
    by = {(c.engine, c.beam, c.concurrency): c for c in cells}
    keys = list(dict.fromkeys((c.beam, c.concurrency) for c in cells))
    present = {c.engine for c in cells}
    pairs = [(label, s, i) for label, s, i in PAIRS if s in present and i in present]
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
        "engine calls/execution",
        "engine ms/sentence",
        "stub ms/sentence",
        "served - in-process ms/sentence",
    ]
    rows = []
    for (beam, level), (label, served_name, local_name) in itertools.product(keys, pairs):
        local = by[(local_name, beam, level)].phases
        served = by[(served_name, beam, level)].phases
        if not served:
            continue  # a twin without timers (CTranslate2 in process) leaves its columns empty
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
                _round(local.get("batch"), 1),
                *(_round(local.get(k)) for k in ("encoder ms/call", "decoder ms/step")),
                _round(local.get("search ms/step")),
                shares,
                _round(local.get("ms/sentence")),
                round(served["batch"], 1),
                round(served["queue ms/request"], 2),
                round(served["ms/sentence"], 2),
                _round(served.get("engine calls/execution")),
                _round(served.get("engine ms/sentence")),
                _round(_stub(served)),
                _round(served["ms/sentence"] - local["ms/sentence"] if local else None),
            ]
        )
    return table(headers, rows) + "\n\n" + defined(headers, PHASE_MEANINGS)


PHASE_MEANINGS = {
    "beam": "beam size",
    "conc.": "concurrent clients",
    "graphs": "which build: fp32 (the Python search), graph, int8, torch generate, "
    "ctranslate2 (its in-process twin, CTranslate2 int8, has no timers: those columns empty)",
    "in-proc batch": "sentences per call of the in-process twin (its micro-batches)",
    "encoder ms/call": "in-process encoder time per call (Python search only: the engine "
    "searches time nothing inside)",
    "decoder ms/step": "in-process decoder time per decoder step (Python search only)",
    "search ms/step": "in-process time per step outside the encoder and decoder: top-k, "
    "reordering, bookkeeping (Python search only)",
    "decoder / search / encoder share": "those three as shares of the in-process time",
    "in-proc ms/sentence": "in-process wall time of the calls / sentences",
    "Triton batch": "requests per `nmt` execution (Triton's statistics)",
    "Triton queue ms/req": "time a request waited in `nmt`'s queue",
    "Triton compute ms/sentence": "`nmt`'s compute_infer over its executions (batch_stats) / "
    "requests: tokenising, the search (in its stub, or the BLS call to the engine) and "
    "detokenising",
    "engine calls/execution": "`nmt_generate` (or `nmt_ct2`) executions per `nmt` execution "
    "(engine builds: 1 for the graph and for ctranslate2, one per beam size for the "
    "TorchScript search)",
    "engine ms/sentence": "`nmt_generate`'s (or `nmt_ct2`'s) own compute_infer / `nmt` "
    "requests: the search inside Triton's onnxruntime or pytorch backend, or the kit's "
    "ctranslate2 backend (engine builds)",
    "stub ms/sentence": "Triton compute ms/sentence minus engine ms/sentence: tokenising, "
    "padding, the BLS round trip's transfers and detokenising in the `nmt` stub (engine builds)",
    "served - in-process ms/sentence": "Triton compute ms/sentence minus in-proc ms/sentence, "
    "signed: the two are measured at their own batch sizes (columns `in-proc batch` and "
    "`Triton batch`), so a negative value means the served batches were cheaper per sentence, "
    "not that serving costs less than nothing",
}


def _stub(served: dict[str, float]) -> float | None:
    """What the ``nmt`` stub spends around the engine call, per sentence (engine builds)."""
    if "engine ms/sentence" not in served:
        return None
    return served["ms/sentence"] - served["engine ms/sentence"]


def _round(value: float | None, digits: int = 2) -> float | str:
    return "" if value is None else round(value, digits)


def _measured(cell, percentiles: tuple[int, ...]) -> list:
    """A cell's row of the measurements table: beam, concurrency, sentences, sentences/s,
    tokens/s, the latency percentiles (ms) and the score (exact match or agreement)."""
    return [
        cell.beam,
        cell.concurrency,
        len(cell.latencies_s),
        round(cell.sentences_per_s, 1),
        round(cell.tokens_per_s),
        *(round(cell.ms(q), 1) for q in percentiles),
        f"{cell.exact:.3f}",
    ]


def _all(cells, table: Callable, score: str) -> str:
    headers = ["engine", "beam", "conc.", "sentences", "sentences/s", "tokens/s"]
    headers += ["p50 ms", "p99 ms", score]
    meanings = {
        "engine": "what ran (listed at the top)",
        "beam": "beam size",
        "conc.": "concurrent closed-loop clients, one sentence a request",
        "sentences": "sentences translated in the cell",
        "sentences/s": "sentences over the cell's wall time",
        "tokens/s": "target tokens (with `</s>`) over the cell's wall time",
        "p50 ms": "median request latency",
        "p99 ms": "99th percentile request latency",
        "exact match": "share of translations equal to the num2words reference",
        "agreement with in-process": "share of translations equal to in-process ORT's",
    }
    rows = [[c.engine, *_measured(c, (50, 99))] for c in cells]
    return table(headers, rows) + "\n\n" + defined(headers, meanings)


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
        "### The default: the engines' searches against the Python search",
        "",
        _engine_default(cells, table),
        "",
        "### Where the time goes",
        "",
        "Each served engine beside its in-process twin: in process from timers around the "
        "calls, served from the `nmt` model's statistics over the cell.",
        "",
        _phases(cells, table),
        "",
        "### All measurements",
        "",
        _all(cells, table, score),
        "",
    ]


def render(
    results: dict,
    *,
    machine,
    load,
    seconds,
    args: argparse.Namespace,
    table,
    date,
    profiles=(),
    command: str | None = None,
) -> str:
    """The report of one run. Every line describes something this run measured: an engine or
    a model size that is not in ``results`` gets no sentence."""
    start, end = load
    measured = {c.engine for cells in results.values() for c in cells}
    lines = [
        report_header(
            "NMT benchmark: in-process vs Triton vs CTranslate2",
            command=command or f"python -m triton_kit.benchmarks.nmt --sizes {args.sizes}",
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
        "- Engines:",
        *(f"  - {e}: {ENGINE_MEANINGS[e]}." for e in ORDER if e in measured),
    ]
    if "tiny" in results:
        lines.append(
            "- Tiny: the default Marian number model (3+3 layers, d_model 128, 140-piece "
            "vocabulary), held-out English → French number phrases, exact match against "
            f"num2words; {args.repeats} repeats of the matrix (engine order rotated), median row."
        )
    if "large" in results:
        lines.append(
            "- Large: a randomly initialised Marian of opus-mt-en-de's shape (6+6 layers, "
            f"d_model 512, 8 heads, FFN 2048, vocabulary {args.large_vocab or 58101}; "
            "triton_kit/benchmarks/nmt/large.py, nothing downloaded), the same English sources; "
            "random weights never pick `</s>`, so every sentence runs to HF `max_length` 32 (31 "
            f"target tokens); {args.large_sentences} sentences per cell, {args.large_repeats} "
            "repeat(s). Speed only: the last column is agreement with the in-process output."
        )
    lines.append("")
    for name, cells in results.items():
        lines += _suite(name, cells, table)
    if profiles:
        lines += _obstacles(profiles, table)
    return "\n".join(lines)


def _obstacles(profiles, table: Callable) -> list[str]:
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
        _profile_table(list(profiles), table),
        "",
    ]


def _profile_table(profiles, table: Callable) -> str:
    """benchmarks.nmt.profile's StepProfiles, one row each."""
    headers = [
        "decoder file",
        "rows",
        "step ms",
        "kernels/step",
        "bookkeeping kernels",
        "bookkeeping share of kernel time",
        "MatMul share",
        "µs per kernel",
    ]
    rows = [
        [
            p.label,
            p.rows,
            f"{p.step_ms:.3f}",
            p.kernels,
            p.bookkeeping_kernels,
            f"{p.bookkeeping_share:.0%}",
            f"{p.matrix_share:.0%}",
            f"{p.step_ms * 1e3 / p.kernels:.2f}",
        ]
        for p in profiles
    ]
    meanings = {
        "decoder file": "which model size and precision's served `nmt_decoder`",
        "rows": "decoder rows in the step (sentences x beam)",
        "step ms": "one step's wall time, unprofiled",
        "kernels/step": "kernels ONNX Runtime ran in one step",
        "bookkeeping kernels": "of those, ops that only describe, slice, cast or move tensors",
        "bookkeeping share of kernel time": "their share of the profiled kernel time",
        "MatMul share": "MatMul/Gemm kernels' share of the profiled kernel time",
        "µs per kernel": "`step ms` over `kernels/step`",
    }
    return table(headers, rows) + "\n\n" + defined(headers, meanings)


# The recurrent model's report (``--architecture rnn``, results/nmt_rnn.md): its cells beside
# the Transformer's, keyed by each architecture's label.
RNN_LABEL, TRANSFORMER_LABEL = "GRU + attention (nmt_rnn)", "transformer (nmt)"
COMPARISON_ENGINES = {IN_PROCESS: "in-process", TRITON: "Triton"}


def render_comparison(
    results: dict, *, machine: str, seconds: float, args: argparse.Namespace, table, command: str
) -> str:
    """``results``: the recurrent model's and the Transformer's cells (:data:`RNN_LABEL`,
    :data:`TRANSFORMER_LABEL`), in-process and served; other engines measured get rows but no
    ratio."""
    cells = [(label, c) for label, found in results.items() for c in found]
    rows = [
        [label, COMPARISON_ENGINES.get(c.engine, c.engine), *_measured(c, (50, 95, 99))]
        for label, c in cells
    ]
    rate = {(label, c.engine, c.beam, c.concurrency): c.sentences_per_s for label, c in cells}
    ratios = []
    for beam, level in dict.fromkeys((c.beam, c.concurrency) for _, c in cells):
        rnn = [rate[(RNN_LABEL, e, beam, level)] for e in (IN_PROCESS, TRITON)]
        tf = [rate[(TRANSFORMER_LABEL, e, beam, level)] for e in (IN_PROCESS, TRITON)]
        ratios.append(
            [
                beam,
                level,
                _ratio(rnn[1], rnn[0]),
                _ratio(tf[1], tf[0]),
                _ratio(rnn[0], tf[0]),
                _ratio(rnn[1], tf[1]),
            ]
        )
        if torch_search := rate.get((RNN_LABEL, TRITON_TORCH, beam, level)):
            ratios[-1].append(_ratio(torch_search, rnn[1]))
    headers = ["model", "engine", "beam", "concurrency", "sentences", "sentences/s"]
    headers += ["tokens/s", "p50 ms", "p95 ms", "p99 ms", "exact match"]
    ratio_headers = ["beam", "concurrency", "RNN served / in-process"]
    ratio_headers += ["Transformer served / in-process", "RNN / Transformer in-process"]
    ratio_headers += ["RNN / Transformer served"]
    if any(label == RNN_LABEL and c.engine == TRITON_TORCH for label, c in cells):
        ratio_headers += ["RNN TorchScript search / Python search, served"]
    repeats = (
        "one run of the matrix (no repeats)"
        if args.repeats == 1
        else f"{args.repeats} runs of the matrix (engine order rotated), median row"
    )
    return "\n".join(
        [
            report_header(
                "NMT benchmark: recurrent (nmt_rnn) beside the Transformer (nmt)",
                command=command,
                load=f"one run of the matrix in {seconds:.0f} s; the machine is shared with "
                "other jobs, so compare ratios within this run, not absolute figures across runs",
                machine=machine,
            ),
            "- Models: assets/nmt-en-fr-numbers (Marian 3+3 layers, d_model 128) and "
            "assets/nmt-rnn-en-fr-numbers (bidirectional GRU encoder, GRU decoder, hidden "
            "192, Luong attention), same vocabulary and held-out numbers, same search code.",
            "- in-process: python_models.nmt.decode on ONNX Runtime sessions of the served "
            "ONNX files, with a micro-batcher (batches of at most "
            f"{MAX_BATCH}); Triton: the BLS model through the gRPC SDK, one sentence a "
            f"request. Every ONNX model runs with {args.threads} intra-op thread(s).",
            f"- Closed loops; {repeats}; tokens/s counts target "
            "pieces + `</s>`; exact match against num2words.",
            "",
            "## Ratios (sentences/s)",
            "",
            table(ratio_headers, ratios),
            "",
            "## Notes",
            "",
            "- Where each search runs: `Triton` is the python model running the Python search "
            "over ONNX Runtime sessions of its step files inside its stub (no Triton call per "
            "step); `Triton torch generate` is the whole search in one TorchScript module "
            "served by Triton's pytorch backend, which the python model calls by BLS once per "
            "beam size of its batch. The served/in-process gap is the python backend's cost "
            "per request and batch, which weighs more on the recurrent model's cheaper steps.",
            "",
            "## All measurements",
            "",
            table(headers, rows),
            "",
        ]
    )
