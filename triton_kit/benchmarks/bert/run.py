"""BERT embeddings: in-process ONNX Runtime vs the Triton-served ``bert``.

Run as ``python -m triton_kit.benchmarks.bert``; writes ``benchmarks/results/bert.md``. Needs
``python -m triton_kit.build_engines bert`` first (the MiniLM in model_repository/); the
bert-base shape (RANDOM weights, max length 256) is built into the benchmark's
own repository under build/bench_bert/.

Traffic: short (8-16 tokens), medium (60-68) and mixed (uniform 4-256), token
counts including [CLS]/[SEP], closed loop at each concurrency. Both sides use
the same tokenization (python_models.bert.text) and the same ONNX Runtime thread
budget. In-process is an ideal synchronous batcher: the ``concurrency``
outstanding texts are tokenized together, grouped by bucket, one session call
per bucket. Triton is reached with the SDK's AsyncTritonClient over gRPC, one
request per text, client on the same machine. Padding to the maximum length is
the same ensemble with one bucket (``<name>_maxpad``), served by the same server.

The encoder alone (``bert_model``: token ids in, FP32 embedding out, served by Triton's own
onnxruntime backend) is measured at each bucket length the build uses against in-process
ONNX Runtime opened from its config.pbtxt (triton_kit/benchmarks/harness/model_alone.py), at
concurrency 1 and at saturation, held to the 0.95x goal of issue 22.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness import model_alone, perf_analyzer
from triton_kit.benchmarks.harness.floor_model import write_floor_model
from triton_kit.benchmarks.harness.measure import (
    children_cpu_seconds,
    machine_description,
    report_header,
    write_keeping_discussion,
)
from triton_kit.benchmarks.harness.memory import ProcessMemory, memory_lines, server_tree_rss
from triton_kit.benchmarks.harness.model_alone import Comparison, ServedOnnx
from triton_kit.build_engines.repository import parse, write_model
from triton_kit.python_models.bert.text import bucket_lengths, load_tokenizer, token_ids, tokenize
from triton_kit.python_models.common.ort_session import SessionSettings, create_session

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TRAFFIC = {"short": (8, 16), "medium": (60, 68), "mixed": (4, 256)}
CONCURRENCY = (1, 8, 32)
POOL_SIZE = 400
MAXPAD = "triton (max-length padding)"
FLOOR = "triton floor (no-op model)"
AT_SERVED_BATCH = "in-process at Triton's batch"
PA = "triton (perf_analyzer)"
PA_FLOOR = "triton floor (perf_analyzer)"
PA_STABILITY = 50  # % between windows: 20 is rarely reached on the shared 2 cores
ENCODER = "bert_model"


@dataclass(frozen=True)
class ModelUnderTest:
    """One ensemble to benchmark, with how long each measurement cell runs."""

    name: str
    label: str
    seconds: float
    traffic: tuple[str, ...] = tuple(TRAFFIC)
    concurrency: tuple[int, ...] = CONCURRENCY
    floor: str = (
        ""  # a served no-op model beside it (triton_kit/benchmarks/harness/floor_model.py), if any
    )


@dataclass
class Cell:
    """One measurement: an engine serving one traffic at one concurrency."""

    engine: str
    model: str
    traffic: str
    concurrency: int
    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    counts: tuple[float, float] = (0.0, 0.0)  # the encoder's (inferences, executions)
    cpu: float = 0.0  # CPU seconds of the serving side (in-process engine, or Triton's tree)
    reported: dict[str, Any] | None = None  # perf_analyzer's own figures (it keeps no latencies)

    def add(
        self,
        latencies: list[float],
        elapsed: float,
        cpu: float,
        counts: tuple[float, float] = (0, 0),
    ) -> None:
        self.latencies += latencies
        self.elapsed += elapsed
        self.cpu += cpu
        self.counts = (self.counts[0] + counts[0], self.counts[1] + counts[1])

    @property
    def requests(self) -> float:
        return self.counts[0] if self.reported else len(self.latencies)

    @property
    def cpu_ms(self) -> float:
        """Serving CPU per request: robust to other jobs' load, unlike wall-clock rates."""
        return 1000 * self.cpu / max(self.requests, 1)

    @property
    def batch(self) -> float | None:
        return self.counts[0] / self.counts[1] if self.counts[1] else None

    @property
    def throughput(self) -> float:
        if self.reported:
            return self.reported["items_per_s"]
        return len(self.latencies) / self.elapsed

    def percentile(self, q: float) -> float:
        if self.reported:
            return self.reported[f"p{q:g}"]
        return float(np.percentile(self.latencies, q)) * 1000


# -- traffic ---------------------------------------------------------------------------------
def vocabulary_words(tokenizer: Any) -> list[str]:
    """Whole-word vocabulary entries: each is one token when separated by spaces."""
    vocab = tokenizer.get_vocab()
    return sorted(w for w in vocab if w.isascii() and w.isalpha() and len(w) >= 3)


def text_with_tokens(tokenizer: Any, words: list[str], tokens: int, rng: Any) -> str:
    """A text of exactly ``tokens`` tokens including [CLS] and [SEP]."""
    chosen = list(rng.choice(words, size=max(tokens - 2, 1)))
    while True:
        text = " ".join(chosen)
        count = len(token_ids(tokenizer, [text])[0])
        if count == tokens or (count < tokens and not chosen):
            return text
        if count > tokens:
            chosen.pop()
        else:
            chosen.append(str(rng.choice(words)))


def traffic_pool(tokenizer: Any, low: int, high: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = vocabulary_words(tokenizer)
    return [
        text_with_tokens(tokenizer, words, int(rng.integers(low, high + 1)), rng)
        for _ in range(POOL_SIZE)
    ]


@dataclass
class Setup:
    """What both engines share for one model: tokenizer, buckets, the ONNX file, topology."""

    tokenizer: Any
    buckets: tuple[int, ...]
    onnx: Path
    instances: int  # of the served encoder model, one in-process session each
    session: SessionSettings  # the served encoder's session options, used in-process too

    @property
    def threads(self) -> int:
        return self.session.intra_op_threads


# -- in-process ------------------------------------------------------------------------------
def run_in_process(
    sessions: list[Any],
    setup: Setup,
    *,
    texts: list[str],
    concurrency: int,
    seconds: float,
) -> tuple[list[float], float]:
    """Each session (one per served instance) serves its share of the clients in rounds.

    A round tokenizes its texts together, then runs one session call per bucket. Texts are
    taken in pool order (as by Triton's workers), so both engines serve the same mix.
    """
    shares = [
        concurrency // len(sessions) + (i < concurrency % len(sessions))
        for i in range(len(sessions))
    ]
    latencies: list[float] = []
    order = itertools.cycle(texts)
    lock = threading.Lock()
    start = time.perf_counter()

    def serve(session: Any, share: int) -> None:
        while time.perf_counter() - start < seconds:
            with lock:
                batch = [next(order) for _ in range(share)]
            submitted = time.perf_counter()
            for indices, feeds in tokenize(setup.tokenizer, batch, setup.buckets):
                session.run(None, feeds)
                latencies.extend([time.perf_counter() - submitted] * len(indices))

    workers = [
        threading.Thread(target=serve, args=(session, share))
        for session, share in zip(sessions, shares, strict=True)
        if share
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return latencies, time.perf_counter() - start


# -- Triton ----------------------------------------------------------------------------------
async def run_triton(
    url: str, model: str, texts: list[str], concurrency: int, seconds: float
) -> tuple[list[float], float]:
    """``concurrency`` closed-loop workers, one request per text (in pool order), until the
    time is up."""
    from triton_kit.client import AsyncTritonClient

    client = AsyncTritonClient(url, timeout=600, models={"embed": model})
    latencies: list[float] = []
    order = itertools.cycle(texts)
    start = time.perf_counter()

    async def worker() -> None:
        while time.perf_counter() - start < seconds:
            text = next(order)
            sent = time.perf_counter()
            await client.embed(text)
            latencies.append(time.perf_counter() - sent)

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await client.close()
    return latencies, time.perf_counter() - start


def model_counts(metrics_url: str, model: str) -> tuple[float, float]:
    """(inferences, executions) of one model from Triton's Prometheus metrics."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    values = {}
    for metric in ("nv_inference_count", "nv_inference_exec_count"):
        prefix = f'{metric}{{model="{model}",'
        values[metric] = sum(
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
        )
    return values["nv_inference_count"], values["nv_inference_exec_count"]


def measure_triton(server: Any, ensemble: str, encoder: str, cell: Cell, **load: Any) -> None:
    """Add one Triton run to ``cell``, and the encoder's inferences/executions to its counts."""
    before, cpu = model_counts(server.metrics_url, encoder), children_cpu_seconds()
    latencies, elapsed = asyncio.run(run_triton(server.grpc_url, ensemble, **load))
    after, cpu = model_counts(server.metrics_url, encoder), children_cpu_seconds() - cpu
    cell.add(latencies, elapsed, cpu, (after[0] - before[0], after[1] - before[1]))


def measure_perf_analyzer(
    server: Any, model: str, cell: Cell, texts: list[str], seconds: float, work: Path
) -> None:
    """``cell`` from one perf_analyzer run (C++ client, batch 1) sending ``texts`` in turn,
    in windows of ``seconds`` until two agree."""
    data = perf_analyzer.text_inputs(work / f"texts-{cell.traffic}.json", "TEXT", texts)
    before, cpu = model_counts(server.metrics_url, model), children_cpu_seconds()
    result = perf_analyzer.run(
        server.grpc_url, model, cell.concurrency, seconds, work, data, stability=PA_STABILITY
    )
    after, cpu = model_counts(server.metrics_url, model), children_cpu_seconds() - cpu
    if "p50" not in result:
        print(f"  perf_analyzer {model}: {result}", flush=True)
        return
    cell.reported, cell.cpu = result, cpu
    cell.counts = (after[0] - before[0], after[1] - before[1])


def in_process(sessions: list[Any], setup: Setup, **load: Any) -> tuple[list[float], float, float]:
    """:func:`run_in_process` plus the CPU seconds it used (this process, all threads)."""
    cpu = time.process_time()
    latencies, elapsed = run_in_process(sessions, setup, **load)
    return latencies, elapsed, time.process_time() - cpu


# -- repository ------------------------------------------------------------------------------
def copy_models(source: Path, target: Path, names: Sequence[str]) -> None:
    for name in names:
        if not (source / name / "config.pbtxt").exists():
            sys.exit(
                f"{source / name} is missing: run `python -m triton_kit.build_engines bert` first"
            )
        shutil.copytree(source / name, target / name)


def add_maxpad_variant(repo: Path, name: str) -> str:
    """``<name>_maxpad``: the same model and encoder, padding every text to the max length."""
    variant = f"{name}_maxpad"
    config = parse((repo / name / "config.pbtxt").read_text())
    config.name = variant
    config.parameters["buckets"].string_value = config.parameters["max_length"].string_value
    files = {p.name: p for p in (repo / name / "1").iterdir() if p.is_file()}
    write_model(repo, config, files)
    return variant


def build_bert_base(repo: Path, work: Path, like: Setup) -> None:
    """bert-base shape, RANDOM weights, max length 256, served like the MiniLM encoder."""
    command = [sys.executable, "-m", "triton_kit.build_engines", "bert", "--shape", "bert-base"]
    command += ["--max-length", "256", "--name", "bert_base", "--threads", str(like.threads)]
    command += ["--instances", str(like.instances), "--buckets", ",".join(map(str, like.buckets))]
    command += ["--output-repository", str(repo), "--work-dir", str(work)]
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def prepare_repository(args: argparse.Namespace, models: list[ModelUnderTest]) -> Path:
    repo = args.work_dir / "repo"
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    copy_models(args.model_repository, repo, ["bert", "bert_preprocess", "bert_model"])
    if any(m.name == "bert_base" for m in models):
        build_bert_base(repo, args.work_dir / "work", model_setup(repo, "bert"))
    for model in models:
        add_maxpad_variant(repo, model.name)
        if model.floor:
            add_floor(repo, model)
    return repo


def add_floor(repo: Path, model: ModelUnderTest) -> None:
    """The no-op model answering like ``model`` (same width, batch limit and batcher)."""
    config = parse((repo / model.name / "config.pbtxt").read_text())
    width = int(config.output[0].dims[-1])
    write_floor_model(repo, model.floor, width, config.max_batch_size)


def minilm_label(repository: Path) -> str:
    """What the served ``bert`` encoder is, from its build record (random weights are for
    speed only: the lent GPU machine builds MiniLM's shape without its weights)."""
    record = repository / "bert_model" / "build.json"
    info = json.loads(record.read_text()) if record.exists() else {}
    if info.get("random_weights") == "true":
        return "MiniLM-L6 shape (RANDOM WEIGHTS)"
    return "all-MiniLM-L6-v2 (real weights)"


# -- running ---------------------------------------------------------------------------------
def model_setup(repo: Path, name: str) -> Setup:
    """Tokenizer and buckets of ``<name>``; the ONNX file, instances and session options of
    ``<name>_model``, the encoder Triton's onnxruntime backend serves and ``<name>`` calls."""
    pre = parse((repo / f"{name}_preprocess" / "config.pbtxt").read_text())
    max_length = int(pre.parameters["max_length"].string_value)
    buckets = [int(b) for b in pre.parameters["buckets"].string_value.split(",")]
    tokenizer = load_tokenizer(repo / f"{name}_preprocess" / "1" / "tokenizer.json", max_length)
    encoder = ServedOnnx.read(repo, f"{name}_model")
    return Setup(
        tokenizer, bucket_lengths(buckets, max_length), encoder.onnx, encoder.instances,
        encoder.settings,
    )  # fmt: skip


def model_cells(
    server: Any, model: ModelUnderTest, setup: Setup, pools: dict[str, list[str]], work: Path
) -> list[Cell]:
    """Every cell of one model. Each is measured in two halves, the engines alternating
    (in-process, Triton[, max-length], in-process, Triton[, max-length]), so load drift from
    other jobs on the machine hits every engine alike."""
    sessions = [create_session(setup.onnx, setup.session) for _ in range(setup.instances)]
    warm = ["warm " * (bucket - 2) for bucket in setup.buckets]
    for session in sessions:  # the first call per shape plans memory: keep it out of the cells
        for _, feeds in tokenize(setup.tokenizer, warm, setup.buckets):
            session.run(None, feeds)
    served = [model.name, f"{model.name}_maxpad", *([model.floor] if model.floor else [])]
    asyncio.run(warm_up(server.grpc_url, served, warm))
    cells = []
    for traffic in model.traffic:
        texts = pools[traffic]
        for concurrency in model.concurrency:
            engines = {"in-process": "", "triton": model.name}
            if traffic == "mixed":
                engines[MAXPAD] = f"{model.name}_maxpad"
            if model.floor:
                engines[FLOOR] = model.floor
            row = {e: Cell(e, model.name, traffic, concurrency) for e in engines}
            load = {"texts": texts, "concurrency": concurrency, "seconds": model.seconds / 2}
            for _ in range(2):
                row["in-process"].add(*in_process(sessions, setup, **load))
                for engine, ensemble in list(engines.items())[1:]:
                    measure_triton(server, ensemble, ensemble, row[engine], **load)
            if model.floor:
                row[AT_SERVED_BATCH] = at_served_batch(sessions, setup, row["triton"], load)
                if perf_analyzer.binary():
                    for engine, name in ((PA, model.name), (PA_FLOOR, model.floor)):
                        row[engine] = Cell(engine, model.name, traffic, concurrency)
                        seconds = model.seconds / 2
                        measure_perf_analyzer(server, name, row[engine], texts, seconds, work)
                        if not row[engine].reported:
                            del row[engine]
            for cell in row.values():
                progress(cell)
            cells += row.values()
    return cells


def at_served_batch(sessions: list[Any], setup: Setup, served: Cell, load: dict) -> Cell:
    """In-process again, with rounds as large as Triton's mean batch in this cell: what the
    encoder costs per text at the batches the server actually formed."""
    cell = Cell(AT_SERVED_BATCH, served.model, served.traffic, served.concurrency)
    batch = max(1, min(served.concurrency, round(served.batch or 1)))
    rerun = {**load, "concurrency": batch, "seconds": 2 * load["seconds"]}
    cell.add(*in_process(sessions, setup, **rerun))
    return cell


async def warm_up(url: str, ensembles: list[str], texts: list[str]) -> None:
    """One request per bucket and a concurrent burst, so no cell pays first-call costs."""
    from triton_kit.client import AsyncTritonClient

    for ensemble in ensembles:
        client = AsyncTritonClient(url, timeout=600, models={"embed": ensemble})
        try:
            for text in texts:
                await client.embed(text)
            await client.embed(texts * 2)
        finally:
            await client.close()


def progress(cell: Cell) -> None:
    batch = f" batch {cell.batch:.1f}" if cell.batch else ""
    print(
        f"  {cell.model:9} {cell.engine:28} {cell.traffic:6} c={cell.concurrency:<2} "
        f"{cell.throughput:7.1f} req/s p50 {cell.percentile(50):7.1f} ms "
        f"p99 {cell.percentile(99):7.1f} ms cpu {cell.cpu_ms:6.1f} ms/req "
        f"n={cell.requests:.0f}{batch}",
        flush=True,
    )


def encoder_alone(
    server: Any, repo: Path, setup: Setup, args: argparse.Namespace
) -> tuple[ServedOnnx, list[Comparison]]:
    """``bert_model`` alone at each bucket length: in-process (its config's session options,
    one session per instance) then perf_analyzer, at concurrency 1 and at saturation."""
    served = ServedOnnx.read(repo, ENCODER)
    sessions = served.sessions()
    rng = np.random.default_rng(0)
    vocab = setup.tokenizer.get_vocab_size()
    work = args.work_dir / "encoder"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for length in setup.buckets:
        ids = rng.integers(1000, vocab, size=(args.encoder_concurrency, length), dtype=np.int64)
        mask = np.ones_like(ids)
        requests = [{"input_ids": i, "attention_mask": m} for i, m in zip(ids, mask, strict=True)]
        data = perf_analyzer.tensor_inputs(work / f"ids-{length}.json", requests)
        for point, c in (("concurrency 1", 1), ("saturation", args.encoder_concurrency)):
            row = model_alone.compare(
                f"{length} tokens",
                point,
                lambda seconds, c=c, ids=ids, mask=mask: model_alone.in_process(
                    sessions,
                    lambda b: {"input_ids": ids[:b], "attention_mask": mask[:b]},
                    c,
                    seconds,
                ),
                lambda window, c=c, data=data: model_alone.served(
                    server.grpc_url, ENCODER, c, window, work, data
                ),
                args.encoder_seconds,
            )
            if isinstance(row, str):
                print(f"  {ENCODER} {length} tokens c={c}: {row}", flush=True)
                continue
            rows.append(row)
            print(f"  {ENCODER} {length:3} tokens c={c:<2} in-process "
                  f"{row.local.throughput:7.1f}/s served {row.served.items_per_s:7.1f}/s "
                  f"{row.ratio:.2f}x, by CPU {row.cpu_ratio:.2f}x", flush=True)  # fmt: skip
    return served, rows


def encoder_section(served: ServedOnnx, rows: list[Comparison], seconds: float) -> list[str]:
    return [
        f"## {ENCODER} alone: Triton's own onnxruntime backend vs in-process ONNX Runtime",
        "",
        f"Token ids in (random ids, every position attended), FP32 embedding out, at each "
        f"bucket length the build uses. Served by {served.backend}; in-process, the same ONNX "
        f"file and session options ({served.describe()}, read from its config.pbtxt), one "
        "session per served instance, each in its own thread. Served side: perf_analyzer (C++ "
        f"client, one sequence per request, windows of {seconds / 2:g} s or "
        f"{model_alone.WINDOW_CALLS} in-process call times if longer, until windows agree "
        f"within {model_alone.STABILITY} %). In-process: {seconds:g} s per cell, half before "
        "and half after the served cell, so drift in other jobs' load hits both sides; CPU "
        "ms/item is this process's CPU time (warm-up left out) against the tritonserver "
        "process tree's, per item. At saturation the in-flight "
        "sequences are split over the sessions as one batch each. Queue and compute per "
        "request are Triton's own statistics over the cell (compute: the execution of the "
        "batch the request was in).",
        "",
        model_alone.comparison_table(rows) if rows else "(perf_analyzer did not run)",
        "",
        *model_alone.verdicts(rows),
        "",
    ]


# -- report ----------------------------------------------------------------------------------


def find(cells: list[Cell], engine: str, model: str, traffic: str, concurrency: int) -> Cell:
    return next(
        c
        for c in cells
        if (c.engine, c.model, c.traffic, c.concurrency) == (engine, model, traffic, concurrency)
    )


def ms(cell: Cell) -> str:
    return f"{cell.throughput:.1f} | {cell.percentile(50):.2f} | {cell.percentile(99):.0f}"


def model_section(cells: list[Cell], model: ModelUnderTest) -> list[str]:
    lines = [
        f"## {model.label}",
        "",
        "| traffic | conc. | in-process req/s | p50 ms | p99 ms | Triton req/s | p50 ms | p99 ms "
        "| Triton / in-process | in-process CPU ms/req | Triton server CPU ms/req "
        "| CPU-cost ratio | encoder mean batch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for traffic in model.traffic:
        for c in model.concurrency:
            local = find(cells, "in-process", model.name, traffic, c)
            served = find(cells, "triton", model.name, traffic, c)
            ratio = served.throughput / local.throughput
            lines.append(
                f"| {traffic} | {c} | {ms(local)} | {ms(served)} | {ratio:.2f}x "
                f"| {local.cpu_ms:.1f} | {served.cpu_ms:.1f} | {local.cpu_ms / served.cpu_ms:.2f}x "
                f"| {served.batch or 0:.1f} |"
            )
    if "mixed" not in model.traffic:
        return [*lines, ""]
    lines += [
        "",
        f"Bucketing vs padding to the maximum length, mixed traffic, both served by Triton "
        f"(`{model.name}` vs `{model.name}_maxpad`, same encoder):",
        "",
        "| conc. | bucketed req/s | p50 ms | p99 ms | max-length req/s | p50 ms | p99 ms "
        "| bucketed / max-length | server CPU ms/req, bucketed | max-length | CPU-cost ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in model.concurrency:
        bucketed = find(cells, "triton", model.name, "mixed", c)
        padded = find(cells, MAXPAD, model.name, "mixed", c)
        ratio = bucketed.throughput / padded.throughput
        lines.append(
            f"| {c} | {ms(bucketed)} | {ms(padded)} | {ratio:.2f}x | {bucketed.cpu_ms:.1f} "
            f"| {padded.cpu_ms:.1f} | {padded.cpu_ms / bucketed.cpu_ms:.2f}x |"
        )
    return [*lines, ""]


def floor_section(cells: list[Cell], model: ModelUnderTest) -> list[str]:
    """How much of Triton / in-process two causes explain: the serving path alone (the no-op
    floor) and the smaller batches the server forms (in-process rerun at Triton's batch)."""
    if not model.floor:
        return []
    lines = [
        f"Where the served time goes. `{model.floor}` is a served python model that does no "
        "work (triton_kit/benchmarks/harness/floor_model.py), "
        f"with `{model.name}`'s interface and batcher, "
        "measured in the same cells by the same client. Unexplained p50 = Triton p50 - "
        "in-process p50 - floor p50. p50 ceiling (concurrency 1) = in-process p50 / "
        "(in-process p50 + floor p50). The in-process batcher takes every client each round, "
        "Triton's batches are smaller (closed-loop clients drift into cohorts), so the "
        "in-process engine is run again with rounds of Triton's mean batch: CPU ceilings = "
        "in-process CPU at its own batch / (in-process CPU + the floor's server CPU), with the "
        "in-process CPU taken at its own batch, then at Triton's.",
        "",
        "| traffic | conc. | Triton / in-process | in-process p50 ms | floor p50 ms "
        "| Triton p50 ms | unexplained p50 ms | p50 ceiling | Triton batch "
        "| in-process CPU ms/req, own batch / Triton's | floor server CPU ms/req "
        "| CPU-cost ratio | CPU ceiling, own batch / Triton's |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for traffic in model.traffic:
        for c in model.concurrency:
            local, served, floor, rebatched = (
                find(cells, engine, model.name, traffic, c)
                for engine in ("in-process", "triton", FLOOR, AT_SERVED_BATCH)
            )
            p50 = [cell.percentile(50) for cell in (local, floor, served)]
            ceiling = f"{p50[0] / (p50[0] + p50[1]):.2f}x" if c == 1 else "-"
            cpu = (local.cpu_ms, rebatched.cpu_ms)
            lines.append(
                f"| {traffic} | {c} | {served.throughput / local.throughput:.2f}x "
                f"| {p50[0]:.2f} | {p50[1]:.2f} | {p50[2]:.2f} | {p50[2] - p50[0] - p50[1]:.2f} "
                f"| {ceiling} | {served.batch or 0:.1f} | {cpu[0]:.2f} / {cpu[1]:.2f} "
                f"| {floor.cpu_ms:.2f} | {local.cpu_ms / served.cpu_ms:.2f}x "
                f"| {cpu[0] / (cpu[0] + floor.cpu_ms):.2f}x / "
                f"{cpu[0] / (cpu[1] + floor.cpu_ms):.2f}x |"
            )
    return [*lines, ""]


def perf_analyzer_section(cells: list[Cell], model: ModelUnderTest) -> list[str]:
    """The same cells with Triton's C++ load generator as the client: the serving path's own
    cost, without the Python client's (which shares the 2 cores in the rows above)."""
    if not model.floor:
        return []
    measured = {(c.traffic, c.concurrency) for c in cells if c.engine == PA}
    if not measured:
        return ["perf_analyzer rows: not measured (scripts/install-perf-analyzer.sh).", ""]
    lines = [
        f"The same cells with perf_analyzer (Triton's C++ load generator, batch 1, closed "
        f"loop, the traffic's texts in turn; windows of {model.seconds / 2:g} s until two "
        f"agree within {PA_STABILITY} %) as the client instead of the SDK:",
        "",
        "| traffic | conc. | in-process req/s | p50 ms | Triton (perf_analyzer) req/s | p50 ms "
        "| p99 ms | Triton / in-process | added p50 ms | floor (perf_analyzer) p50 ms "
        "| server CPU ms/req | CPU-cost ratio | encoder mean batch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for traffic, c in sorted(measured, key=lambda k: (model.traffic.index(k[0]), k[1])):
        local, served = (find(cells, e, model.name, traffic, c) for e in ("in-process", PA))
        floors = [
            x for x in cells if (x.engine, x.traffic, x.concurrency) == (PA_FLOOR, traffic, c)
        ]
        floor_p50 = f"{floors[0].percentile(50):.2f}" if floors else "-"
        p50 = (local.percentile(50), served.percentile(50))
        lines.append(
            f"| {traffic} | {c} | {local.throughput:.1f} | {p50[0]:.2f} "
            f"| {served.throughput:.1f} | {p50[1]:.2f} | {served.percentile(99):.1f} "
            f"| {served.throughput / local.throughput:.2f}x | {p50[1] - p50[0]:.2f} | {floor_p50} "
            f"| {served.cpu_ms:.2f} | {local.cpu_ms / served.cpu_ms:.2f}x "
            f"| {served.batch or 0:.1f} |"
        )
    return [*lines, ""]


def memory_section(memory: list[ProcessMemory]) -> list[str]:
    return [
        "## Resident memory of the server after the cells",
        "",
        "RSS of tritonserver and each python-backend stub (psutil over the server's process "
        "tree), read once every cell had run; the repository also holds the benchmark's "
        "own variants (`_maxpad`, the floor model).",
        "",
        *memory_lines(memory),
        "",
    ]


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "NOT met"


def summary(cells: list[Cell], models: list[ModelUnderTest]) -> list[str]:
    lines = [
        "## Summary: mixed traffic at saturation (the highest concurrency measured)",
        "",
        "| model | conc. | Triton / in-process req/s (target >= 0.9x) | same, by CPU cost "
        "| bucketing / max-length padding req/s (target >= 1.5x) | same, by CPU cost |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model in models:
        if "mixed" not in model.traffic:
            continue
        top = max(model.concurrency)
        served = find(cells, "triton", model.name, "mixed", top)
        local = find(cells, "in-process", model.name, "mixed", top)
        padded = find(cells, MAXPAD, model.name, "mixed", top)
        first = served.throughput / local.throughput
        second = served.throughput / padded.throughput
        lines.append(
            f"| {model.label} | {top} | {first:.2f}x {verdict(first, 0.9)} "
            f"| {local.cpu_ms / served.cpu_ms:.2f}x | {second:.2f}x {verdict(second, 1.5)} "
            f"| {padded.cpu_ms / served.cpu_ms:.2f}x |"
        )
    return [*lines, ""]


def header(setup: Setup, models: list[ModelUnderTest], load: tuple) -> list[str]:
    """Method and machine; ``load`` is (machine description at start, load average at end)."""
    seconds = ", ".join(f"{m.label.split(' ')[0]} {m.seconds:g} s" for m in models)
    return [
        report_header(
            "BERT sentence embeddings: in-process ONNX Runtime vs Triton",
            command="python -m triton_kit.benchmarks.bert (make bench-bert)",
            load=f"one run; 1-min load average at end {load[1]:.2f}. The cores may be **shared "
            "with other jobs**, so absolute numbers are noisy: compare the ratios, whose two "
            "sides were measured back to back",
            machine=load[0],
        ),
        f"- ONNX Runtime CPU, FP32. The text-in `bert` model tokenises in its python stub and "
        f"calls `{ENCODER}` through BLS, one call per length bucket; `{ENCODER}` runs in "
        f"Triton's own onnxruntime backend: {setup.instances} instance(s) x "
        f"{setup.threads} intra-op thread(s) (session config "
        f"{dict(setup.session.config_entries)}); "
        f"in-process uses the same: {setup.instances} session(s), same options, each driven by "
        "its own Python thread with its share of the clients. Buckets: "
        + ",".join(map(str, setup.buckets))
        + ".",
        "- Traffic: short = 8-16 tokens, medium = 60-68, mixed = uniform 4-256 (token counts "
        f"include [CLS]/[SEP]); a pool of {POOL_SIZE} texts per traffic built from whole-word "
        "vocabulary entries, each text exactly its target length.",
        "- In-process: an ideal synchronous batcher. Each round takes `concurrency` texts, "
        "tokenizes them with the same function as the Triton model "
        "(python_models.bert.text), runs one "
        "session call per length bucket, and a text's latency is the time to its bucket's result.",
        "- Triton: the `bert` python model (tokenizer in the stub, one BLS call to `bert_model` "
        "per length bucket of each execute call; dynamic batching with no queue delay in both), "
        "closed-loop workers with the SDK's AsyncTritonClient over gRPC, "
        "one request per text, client on the same 2 cores. Encoder mean batch = inferences / "
        "executions of the served model "
        "during the cell (Prometheus metrics).",
        "- CPU ms/req: CPU time of the serving side per request, from the kernel's accounting "
        "(in-process: this process, tokenization included; Triton: the tritonserver process and "
        "its backend stubs, the client excluded). Unlike wall-clock rates it hardly depends on "
        "other jobs' load, so the CPU-cost ratio estimates the throughput ratio on 2 dedicated "
        "cores at saturation.",
        f"- Each engine gets {seconds} per cell, in two halves with the engines alternating "
        "(in-process, Triton, max-length, in-process, Triton, max-length), so drift in the "
        "other jobs' load hits all alike; in-flight requests finish after each half. "
        "p99 from a few dozen to a few hundred samples is indicative only.",
        "- bert-base (RANDOM WEIGHTS; for speed only) runs "
        + ", ".join(next(m.traffic for m in models if m.name == "bert_base"))
        + " traffic at concurrency "
        + ", ".join(str(c) for m in models if m.name == "bert_base" for c in m.concurrency)
        + " by default (`--base-traffic short medium mixed --base-concurrency 1 8 32` for "
        "all): one bert-base text of 256 tokens takes about half a second on one core here, "
        "so concurrency 8 already saturates the 2 cores, and each cell would otherwise "
        "take minutes."
        if any(m.name == "bert_base" for m in models)
        else "",
        "",
    ]


def write_report(
    path: Path,
    setup: Setup,
    cells: list[Cell],
    models: list[ModelUnderTest],
    load,
    encoder,
    memory: list[ProcessMemory],
) -> None:
    """``encoder``: (ServedOnnx, comparisons, seconds) of the encoder-alone cells, or None."""
    lines = header(setup, models, load) + summary(cells, models) + memory_section(memory)
    if encoder:
        lines += encoder_section(*encoder)
    for model in models:
        lines += model_section(cells, model) + floor_section(cells, model)
        lines += perf_analyzer_section(cells, model)
    write_keeping_discussion(path, "\n".join(lines))
    print(f"wrote {path}")


# -- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.bert", description=__doc__
    )
    parser.add_argument("--model-repository", type=Path, default=PROJECT_ROOT / "model_repository")
    parser.add_argument("--work-dir", type=Path, default=PROJECT_ROOT / "build" / "bench_bert")
    parser.add_argument("--output", type=Path, default=RESULTS / "bert.md")
    parser.add_argument("--seconds", type=float, default=5.0, help="per cell and engine, MiniLM")
    parser.add_argument(
        "--base-seconds", type=float, default=10.0, help="per cell and engine, bert-base"
    )
    parser.add_argument(
        "--base-traffic",
        nargs="+",
        choices=list(TRAFFIC),
        default=["mixed"],
        help="bert-base traffic (default: mixed only, to keep the run to a few minutes)",
    )
    parser.add_argument(
        "--base-concurrency",
        nargs="+",
        type=int,
        default=[1, 8],
        help="bert-base concurrencies (default: 1 8; 8 already saturates 2 cores, and 32 "
        "closed-loop bert-base requests take minutes to drain)",
    )
    parser.add_argument(
        "--traffic",
        nargs="+",
        choices=list(TRAFFIC),
        default=list(TRAFFIC),
        help="MiniLM traffic (default: all; the bucketing rows need mixed)",
    )
    parser.add_argument(
        "--concurrency",
        nargs="+",
        type=int,
        default=list(CONCURRENCY),
        help="MiniLM concurrencies (default: %(default)s)",
    )
    parser.add_argument("--skip-base", action="store_true", help="MiniLM only (quicker)")
    parser.add_argument(
        "--encoder-seconds", type=float, default=3.0, help=f"per cell and engine, {ENCODER} alone"
    )
    parser.add_argument(
        "--encoder-concurrency",
        type=int,
        default=16,
        help=f"{ENCODER} alone at saturation: sequences in flight (in-process: split over "
        "the sessions, one per served instance, as one batch each)",
    )
    parser.add_argument("--skip-encoder", action="store_true", help=f"no {ENCODER}-alone rows")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from triton_kit.server import ServerConfig, TritonServer

    args = parse_args(argv)
    label = minilm_label(args.model_repository)
    traffic = tuple(t for t in TRAFFIC if t in args.traffic)
    concurrency = tuple(sorted(set(args.concurrency)))
    models = [ModelUnderTest("bert", label, args.seconds, traffic, concurrency, "bert_floor")]
    if not args.skip_base:
        label = "bert-base shape (RANDOM WEIGHTS, max length 256)"
        traffic = tuple(t for t in TRAFFIC if t in args.base_traffic)
        concurrency = tuple(sorted(set(args.base_concurrency)))
        models.append(ModelUnderTest("bert_base", label, args.base_seconds, traffic, concurrency))
    machine = machine_description()
    repo = prepare_repository(args, models)
    setups = {m.name: model_setup(repo, m.name) for m in models}
    pools = {
        t: traffic_pool(setups["bert"].tokenizer, low, high, seed=i)
        for i, (t, (low, high)) in enumerate(TRAFFIC.items())
    }
    log = args.work_dir / "tritonserver.log"
    config = ServerConfig(repo, http_port=0, grpc_port=0, metrics_port=0, log_file=log)
    cells: list[Cell] = []
    encoder = None
    with TritonServer(config) as server:
        if not args.skip_encoder:
            served, rows = encoder_alone(server, repo, setups["bert"], args)
            encoder = (served, rows, args.encoder_seconds)
        for model in models:
            cells += model_cells(server, model, setups[model.name], pools, args.work_dir)
        assert server._process is not None
        memory = server_tree_rss(server._process.pid)  # warm: every bucket has run
    load = (machine, os.getloadavg()[0])
    write_report(args.output, setups["bert"], cells, models, load, encoder, memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
