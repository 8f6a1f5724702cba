"""NMT beam 4 on the GPU: served against in-process, and against the host's CPU.

Run on a GPU host (scripts/gpu/bench.sh .whl OUT triton_kit.benchmarks.gpu.nmt --out OUT)::

    python -m triton_kit.benchmarks.gpu.nmt --out OUT_DIR [--sizes tiny,large] [--precision fp16]

At concurrency 1, 8 and 32, closed loops, one sentence a request; the in-process rows get
the micro-batcher of triton_kit/benchmarks/nmt/measure.py (what Triton's dynamic batcher
gives ``nmt``).
``tiny`` is the kit's trained English→French numbers model; ``large`` a randomly
initialised Marian of opus-mt-en-de's shape (6+6 layers, d_model 512, 58k vocabulary;
speed only).

Rows per size:
- ``torchscript``: ``python -m triton_kit.build_engines nmt --engine torch`` (TorchScript
  encoder and decoder step); the ``nmt`` python model's search (python_models.nmt.decode)
  drives them, in-process and served;
- ``torchscript generate``: the same with ``--search engine``: the whole generation in one
  TorchScript module (``nmt_generate``), in-process and served by Triton's own pytorch
  backend (``nmt`` tokenises and calls it once per batch);
- ``onnxruntime fp32 cpu, served``: the default build of the same model served on the
  host's CPU (every core), for GPU served / CPU served;
- ``eager <device>`` (``--devices``): the export's modules, eager, in-process.
The served / in-process ratio of a row is its serving overhead.
Writes gpu_nmt.md and gpu_nmt.json into OUT_DIR.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from triton_kit.benchmarks.gpu.report import header
from triton_kit.benchmarks.nmt.in_process import step_model_throughput
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT

LEVELS = (1, 8, 32)
# The CPU-served rows' intra-op threads: every core of the host (the ONNX Runtime build
# that size_setup writes, python search in the nmt model's stub).
CPU_THREADS = os.cpu_count() or 1
# A discarded first cell at the top concurrency: on CUDA each new batch shape picks its
# kernels the first time (seen on the H100: p95 887 ms at concurrency 8 without it).
WARM_LEVELS = (LEVELS[-1], *LEVELS)


@dataclass(frozen=True)
class Options:
    out: Path
    sizes: tuple[str, ...]
    sentences: int
    devices: tuple[str, ...]
    precision: str = "fp32"  # of the step-model build (python search)
    generate_precision: str = "fp16"  # of the --search engine build
    served: bool = True
    searches: tuple[str, ...] = ("python", "engine")
    cpu_sentences: int = 32  # 0: no CPU-served rows
    queue_delays_us: tuple[int, ...] = ()  # extra served rows of the generate build
    generate_executors: tuple[str, ...] = ("simple",)  # nmt_generate's JIT executor, per row


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the report")
    parser.add_argument("--sizes", default="tiny,large", help="tiny, large or both")
    parser.add_argument("--sentences", type=int, default=96, help="sentences per cell")
    parser.add_argument("--devices", default="cuda,cpu", help="torch devices to compare")
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=("fp32", "fp16"),
        help="of the TorchScript step-model build (python search)",
    )
    parser.add_argument(
        "--generate-precision",
        default=Options.generate_precision,
        choices=("fp32", "fp16"),
        help="of the --search engine build (the TorchScript search)",
    )
    parser.add_argument(
        "--generate-executors",
        default=",".join(Options.generate_executors),
        help="the JIT executors to serve nmt_generate under, a set of rows each: simple (what "
        "the build writes: DISABLE_OPTIMIZED_EXECUTION), profiling (fuses kernels, "
        "re-specialises per shape)",
    )
    parser.add_argument("--no-served", action="store_true", help="skip the TorchScript rows")
    parser.add_argument(
        "--searches",
        default="python,engine",
        help="TorchScript builds to serve: python (the nmt model's search over the step "
        "modules), engine (--search engine: the whole generation in one TorchScript module, "
        "served by Triton's pytorch backend)",
    )
    parser.add_argument(
        "--cpu-sentences",
        type=int,
        default=32,
        help="sentences per cell of the same model served on the host's CPU (ONNX Runtime, "
        "every core; 0 skips it)",
    )
    parser.add_argument(
        "--queue-delays-us",
        default="",
        help="comma-separated max_queue_delay_microseconds for nmt: extra served rows of the "
        "--search engine build (the whole batch answers at once, so a short delay lets the "
        "answered clients' next requests gather into one batch)",
    )
    args = parser.parse_args(argv)
    split = lambda text: tuple(x for x in text.split(",") if x)  # noqa: E731
    return Options(
        args.out,
        split(args.sizes),
        args.sentences,
        split(args.devices),
        args.precision,
        args.generate_precision,
        not args.no_served,
        split(args.searches),
        args.cpu_sentences,
        tuple(int(x) for x in split(args.queue_delays_us)),
        split(args.generate_executors),
    )


def size_setup(size: str, work: Path) -> tuple[Path, Path]:
    """(checkpoint, repository holding its ``nmt`` model) for one size."""
    from triton_kit.benchmarks.nmt import large as nmt_large

    if size == "tiny":
        # the Python search over step models (model_repository/'s nmt is CTranslate2's since it
        # became the default): built for the run, a second on the tiny model
        repository = nmt_large.build_repository(
            DEFAULT_CHECKPOINT, work / "tiny-repo", work / "t", 1
        )
        return DEFAULT_CHECKPOINT, repository
    checkpoint = nmt_large.write_checkpoint(work / "large-checkpoint")
    repository = nmt_large.build_repository(
        checkpoint, work / "large-repo", work / "w", CPU_THREADS
    )
    return checkpoint, repository


def run(options: Options) -> dict:
    from triton_kit.build_engines.families.nmt.torchscript.steps import step_model

    work = Path(tempfile.mkdtemp(prefix="gpu-nmt-"))
    results: dict = {}
    for size in options.sizes:
        try:
            checkpoint, repository = size_setup(size, work)
        except Exception:
            results[size] = {"error": traceback.format_exc()}
            continue
        if options.served:
            runs = [(search, "simple") for search in options.searches if search != "engine"]
            if "engine" in options.searches:
                runs += [("engine", executor) for executor in options.generate_executors]
            for search, executor in runs:
                rows = torchscript_rows(size, checkpoint, work, options, search, executor)
                for key, cells in rows.items():
                    results[key] = cells
                    print(key, json.dumps(cells)[:600], flush=True)
        if options.cpu_sentences:
            key = cpu_row_key(size)
            cpu = dataclasses.replace(options, sentences=options.cpu_sentences)
            try:
                results[key] = [cell_summary(c) for c in _served(repository, checkpoint, cpu)]
            except Exception:
                results[key] = {"error": traceback.format_exc()}
            print(key, json.dumps(results[key])[:600], flush=True)
        for device in options.devices:
            key = f"{size} eager {device}"
            print(f"== {key}", flush=True)
            try:
                cells = step_model_throughput(
                    lambda device=device, checkpoint=checkpoint: step_model(checkpoint, device),
                    repository=repository,
                    beam=4,
                    levels=WARM_LEVELS,
                    sentences=options.sentences,
                    checkpoint=checkpoint,
                )[1:]
                results[key] = [cell_summary(c) for c in cells]
            except Exception:
                results[key] = {"error": traceback.format_exc()}
            print(key, json.dumps(results[key])[:600], flush=True)
    add_agreement(results)
    return results


def cpu_row_key(size: str) -> str:
    return f"{size} onnxruntime fp32 cpu ({CPU_THREADS} threads), served"


CPU_ROW = re.compile(r"\S+ onnxruntime fp32 cpu \(\d+ threads\), served")


def is_cpu_row(key: str) -> bool:
    """The host-CPU served row of a size (the reference of agreement and of GPU / CPU), from
    any host (a report may be rendered from another machine's JSON)."""
    return CPU_ROW.fullmatch(key) is not None


def add_agreement(results: dict) -> None:
    """Each cell's translations against the same size served on the CPU by ONNX Runtime fp32
    (another engine, another precision), over the sentences both translated; then the
    outputs leave the results (a sample stays). The large model's random weights have no
    reference translations, and an fp16 step that broke (every sentence empty) was once
    timed here as a fast one."""
    for size in {key.split(" ", 1)[0] for key in results}:
        cpu = [v for k, v in results.items() if k.startswith(f"{size} ") and is_cpu_row(k)]
        reference = cpu[0][0].get("outputs") if cpu and isinstance(cpu[0], list) else None
        for key, cells in results.items():
            if not key.startswith(f"{size} ") or not isinstance(cells, list):
                continue
            for cell in cells:
                outputs = cell.pop("outputs", None)
                if reference and outputs:
                    pairs = list(zip(outputs, reference, strict=False))
                    cell["agreement"] = sum(a == b for a, b in pairs) / len(pairs)


def torchscript_rows(
    size: str,
    checkpoint: Path,
    work: Path,
    options: Options,
    search: str = "python",
    executor: str = "simple",
) -> dict:
    """In-process and served rows of one ``--engine torch`` repository (errors as rows):
    ``search`` python is the nmt model's search over the step modules, engine the whole
    generation in one TorchScript module (``nmt_generate``, under the JIT ``executor``)."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"  # where the build puts it
    kind = "torchscript" if search == "python" else "torchscript generate"
    precision = options.precision if search == "python" else options.generate_precision
    key = f"{size} {kind} {precision} {device}"
    if executor != "simple":
        key += f" ({executor} executor)"
    try:
        repository = torch_repository(
            checkpoint, work / f"{size}-torch-{search}-{executor}", precision, search, executor
        )
    except Exception:
        return {f"{key}, build": {"error": traceback.format_exc()}}
    local = _in_process if search == "python" else _in_process_generate
    measures = [("in-process", local), ("served", _served)]
    if search == "engine":
        measures.append(("served (perf_analyzer)", _served_perf_analyzer))
        measures += [
            (f"served, queue delay {us} µs", partial(_served_with_delay, us))
            for us in options.queue_delays_us
        ]
    rows: dict = {}
    for label, measure in measures:
        try:
            rows[f"{key}, {label}"] = [
                c if isinstance(c, dict) else cell_summary(c)
                for c in measure(repository, checkpoint, options)
            ]
        except Exception:
            rows[f"{key}, {label}"] = {"error": traceback.format_exc()}
    profiles = sorted(_profile_dir(repository, options).glob("nmt-*.json"))
    if profiles:  # the served model's own phases, summed over the served cells
        rows[f"{key}, served profile"] = {"profile": json.loads(profiles[-1].read_text())}
    return rows


def _profile_dir(repository: Path, options: Options) -> Path:
    return options.out / f"profile-{repository.parent.name}-{repository.name}"


def torch_repository(
    checkpoint: Path, work: Path, precision: str, search: str = "python", executor: str = "simple"
) -> Path:
    """``python -m triton_kit.build_engines nmt --engine torch`` of ``checkpoint``, copied for
    serving (``nmt_generate`` under the JIT ``executor``)."""
    from triton_kit.benchmarks.nmt.served import copy_models
    from triton_kit.build_engines.cli import build_from_argv

    built, served = work / "built", work / "repo"
    argv = ["nmt", "--checkpoint", str(checkpoint), "--engine", "torch"]
    argv += ["--precision", precision, "--max-beam-size", "16", "--verify-sentences", "2"]
    argv += ["--output-repository", str(built), "--work-dir", str(work / "w"), "--instances", "1"]
    argv += ["--search", search]
    build_from_argv(argv)
    served.mkdir(parents=True, exist_ok=True)
    copy_models(built, served, threads=1)  # and no queue timeout: a closed loop
    if executor == "profiling":
        _set_parameter(
            served / "nmt_generate" / "config.pbtxt", "DISABLE_OPTIMIZED_EXECUTION", "false"
        )
    return served


def _set_parameter(config_file: Path, key: str, value: str) -> None:
    from triton_kit.build_engines.repository import parse, render

    config = parse(config_file.read_text())
    config.parameters[key].string_value = value
    config_file.write_text(render(config))


def _in_process(repository: Path, checkpoint: Path, options: Options) -> list:
    from triton_kit.python_models.common.sibling import sibling_device
    from triton_kit.python_models.nmt.torch_steps import load_step_model

    def factory():  # as the served model loads it: the encoder's device, one CPU thread
        return load_step_model(
            repository / "nmt_encoder" / "1" / "model.pt",
            repository / "nmt_decoder" / "1" / "model.pt",
            sibling_device(repository / "nmt" / "1", "nmt_encoder"),
            1,
        )

    return step_model_throughput(
        factory,
        repository=repository,
        beam=4,
        levels=WARM_LEVELS,
        sentences=options.sentences,
        checkpoint=checkpoint,
    )[1:]


def _in_process_generate(repository: Path, checkpoint: Path, options: Options) -> list:
    """The served ``nmt_generate`` TorchScript, loaded as Triton's pytorch backend loads it,
    called once per micro-batch (the ``nmt`` model's BLS call, without the server)."""
    from triton_kit.benchmarks.nmt.in_process import (
        Served,
        engine_throughput,
        torch_generate_engine,
    )

    served = Served.load(repository)
    run = torch_generate_engine(repository, served)
    return engine_throughput(run, repository, 4, WARM_LEVELS, options.sentences, checkpoint)[1:]


PA_SECONDS = 3.0  # perf_analyzer's measurement window


def _served_perf_analyzer(repository: Path, checkpoint: Path, options: Options) -> list:
    """The served ``nmt`` under perf_analyzer (Triton's C++ load generator) instead of the
    kit's Python clients: at c32 the GIL-bound Python client threads space their requests
    out, so the server sees smaller batches than the in-process micro-batcher does."""
    from triton_kit.benchmarks.harness import perf_analyzer
    from triton_kit.benchmarks.nmt.measure import held_out_pairs
    from triton_kit.server.launcher import ServerConfig, TritonServer

    texts = [source for source, _ in held_out_pairs(with_references=False)]
    out = options.out / f"perf_analyzer-{repository.parent.name}"
    out.mkdir(parents=True, exist_ok=True)
    inputs = perf_analyzer.text_inputs(out / "texts.json", "TEXT", texts[: options.sentences])
    config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
    cells = []
    with TritonServer(config) as server:
        for level in WARM_LEVELS:
            result = perf_analyzer.run(server.grpc_url, "nmt", level, PA_SECONDS, out, inputs)
            if "stable" in result.get("error", ""):  # a noisy host: take the last windows
                result = perf_analyzer.run(
                    server.grpc_url, "nmt", level, PA_SECONDS, out, inputs, stability=100
                )
            if "items_per_s" not in result:
                raise RuntimeError(json.dumps(result)[:2000])
            cells.append(_pa_cell(level, result))
    return cells[1:]


def _pa_cell(level: int, result: dict) -> dict:
    return {
        "concurrency": level,
        "sentences_per_s": round(result["items_per_s"], 1),
        **{f"p{q}_ms": round(result[f"p{q}"], 1) for q in (50, 95, 99)},
        "exact": None,
        "phases": {},
    }


def _served_with_delay(delay_us: int, repository: Path, checkpoint: Path, options) -> list:
    """:func:`_served` on a copy whose ``nmt`` batches with ``max_queue_delay_microseconds``."""
    from triton_kit.build_engines.repository import parse, render

    copy = repository.parent / f"{repository.name}-delay-{delay_us}"
    if not copy.exists():
        shutil.copytree(repository, copy)
        config_file = copy / "nmt" / "config.pbtxt"
        config = parse(config_file.read_text())
        config.dynamic_batching.max_queue_delay_microseconds = delay_us
        config_file.write_text(render(config))
    return _served(copy, checkpoint, options)


def _served(repository: Path, checkpoint: Path, options: Options) -> list:
    from triton_kit.benchmarks.nmt.measure import count_tokens_for, held_out_pairs
    from triton_kit.benchmarks.nmt.served import measure_triton
    from triton_kit.python_models.common.base import PROFILE_DIR_ENV
    from triton_kit.server.launcher import ServerConfig, TritonServer

    pairs = held_out_pairs(with_references=(checkpoint / "split.json").exists())
    count = count_tokens_for(repository)
    log = options.out / f"tritonserver-nmt-{repository.parent.name}.log"
    config = ServerConfig(
        model_repository=repository, http_port=0, grpc_port=0, metrics_port=0, log_file=log
    )
    profiles = _profile_dir(repository, options)
    profiles.mkdir(parents=True, exist_ok=True)
    os.environ[PROFILE_DIR_ENV] = str(profiles)  # the stubs inherit it: the search's phases
    try:
        with TritonServer(config) as server:
            return [
                measure_triton(server, 4, level, pairs[: options.sentences], count)
                for level in WARM_LEVELS
            ][1:]
    finally:
        os.environ.pop(PROFILE_DIR_ENV, None)


def cell_summary(cell) -> dict:
    from triton_kit.benchmarks.gpu.load import stats

    percentiles = stats(list(cell.latencies_s))
    return {
        "concurrency": cell.concurrency,
        "sentences_per_s": round(cell.sentences_per_s, 1),
        **{f"{q}_ms": round(v, 1) for q, v in percentiles.items()},
        "exact": cell.exact,
        "tokens_per_sentence": round(cell.tokens / max(len(cell.latencies_s), 1), 1),
        "phases": cell.phases,
        "sample": list(cell.outputs[:2]),  # what came back, for a reader of the JSON
        "outputs": list(cell.outputs),  # for add_agreement, which removes them
    }


def _ratio_note(results: dict) -> str:
    """Served / in-process sentences/s of the same TorchScript, per size and concurrency."""
    lines = ["Served / in-process, same TorchScript on the same device, same run:", ""]
    lines += ["| row | c1 | c8 | c32 |", "|---|---|---|---|"]
    for key, cells in results.items():
        if ", served" not in key or key.endswith("profile") or isinstance(cells, dict):
            continue
        twin, variant = key.split(", served", 1)
        local = results.get(f"{twin}, in-process")
        if not isinstance(local, list):
            continue
        ratios = [
            f"{s['sentences_per_s'] / max(i['sentences_per_s'], 1e-9):.2f}x"
            for s, i in zip(cells, local, strict=True)
        ]
        lines.append(f"| {twin}{variant} | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def _gpu_cpu_note(results: dict) -> str:
    """Each served GPU row over the same size served on the host's CPU (beam 4 both)."""
    lines = ["Served on the GPU / served on the host's CPU, same model and beam, same run:", ""]
    lines += ["| GPU row | CPU row | c1 | c8 | c32 |", "|---|---|---|---|---|"]
    for cpu_key, cpu in results.items():
        if not is_cpu_row(cpu_key) or not isinstance(cpu, list):
            continue
        size = cpu_key.split(" ", 1)[0]
        for key, cells in results.items():
            if not (key.startswith(f"{size} ") and " cuda" in key and ", served" in key):
                continue
            if not isinstance(cells, list) or key.endswith("profile"):
                continue
            ratios = [
                f"{g['sentences_per_s'] / max(c['sentences_per_s'], 1e-9):.1f}x"
                for g, c in zip(cells, cpu, strict=True)
            ]
            lines.append(f"| {key} | {cpu_key} | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


AGREEMENT_NOTE = (
    "`agrees with CPU fp32`: the share of sentences translated as the CPU-served ONNX Runtime "
    "fp32 row translated them (same model, the sentences both ran); `tokens/sentence` is what "
    "came back. A row far below the others measured something else than a translation."
)


def markdown(results: dict, env: dict) -> str:
    lines = [
        header(
            "NMT beam 4 on the GPU: served against in-process, and against the host's CPU",
            env.get("command", "python -m triton_kit.benchmarks.gpu.nmt"),
            "the whole lent GPU",
            env,
        )
    ]
    lines += [_ratio_note(results), "", _gpu_cpu_note(results)]
    head = "| model / device | concurrency | sentences/s | p50 ms | p95 ms | p99 ms | exact match |"
    head += " agrees with CPU fp32 | tokens/sentence | batch |"
    lines += ["", AGREEMENT_NOTE, "", head, "|---|---|---|---|---|---|---|---|---|---|"]
    profiles = []
    for key, cells in results.items():
        if isinstance(cells, dict) and "profile" in cells:
            profiles.append(_profile_line(key, cells["profile"]))
            continue
        if isinstance(cells, dict):
            error = cells["error"].splitlines()[-1][:80]
            lines.append(f"| {key} | error: {error} | | | | | | | | |")
            continue
        for c in cells:
            exact = "" if c["exact"] is None else f"{c['exact']:.3f}"
            agrees = "" if c.get("agreement") is None else f"{c['agreement']:.3f}"
            tokens = c.get("tokens_per_sentence", "")
            times = " | ".join(str(c.get(f"p{q}_ms", "")) for q in (50, 95, 99))
            rate = f"{c['concurrency']} | {c['sentences_per_s']}"
            batch = c.get("phases", {}).get("batch")
            batch = "" if batch is None else f"{batch:.1f}"
            lines.append(f"| {key} | {rate} | {times} | {exact} | {agrees} | {tokens} | {batch} |")
    if profiles:
        lines += ["", "Served: the `nmt` model's own phases (TRITON_KIT_PROFILE_DIR), ms per"]
        lines += ["execute over every served cell; `step` waits for the device.", ""]
        lines += profiles
    return "\n".join(lines) + "\n"


def _profile_line(key: str, profile: dict) -> str:
    phases = ", ".join(f"{name} {ms:.2f}" for name, ms in profile["ms_per_execute"].items())
    return f"- {key}: {profile['executes']} executes, {profile['requests']} requests: {phases}"


def main(argv: list[str] | None = None) -> int:
    from triton_kit.benchmarks.gpu.run import environment
    from triton_kit.benchmarks.gpu.settings import Settings

    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results = run(options)
    env = {**environment(Settings(out=options.out)), "wall_s": round(time.time() - started, 1)}
    arguments = sys.argv[1:] if argv is None else argv
    env["command"] = " ".join(["python -m triton_kit.benchmarks.gpu.nmt", *arguments])
    (options.out / "gpu_nmt.json").write_text(json.dumps({"env": env, **results}, indent=2))
    report = markdown(results, env)
    (options.out / "gpu_nmt.md").write_text(report)
    print(report, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
