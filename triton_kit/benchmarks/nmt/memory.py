"""``python -m triton_kit.benchmarks.nmt.memory``: the resident memory of the server and its
python stubs serving the NMT number model in each layout (issue 31: "each engine is loaded
once; the report gives the resident memory of the server plus its stubs, before and after").

Layouts, each built into its own repository with only the nmt family's models and served by
its own server, in turn: the Python search (the default before issue 31: the ``nmt`` stub
runs ONNX Runtime over ``nmt_encoder``/``nmt_decoder``'s files while Triton's onnxruntime
backend loads the same files), CTranslate2 behind the python ``nmt`` (``--no-ct2-text``), and
the default, the ctranslate2 backend's text mode; then the recurrent model's Python search
and its default, the TorchScript search in Triton's pytorch backend. RSS is read after every
layout has translated the same held-out sentences at beam 1 and 4 (psutil over the server's
process tree); each process's mapped engine libraries are read from ``/proc/<pid>/maps``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import git_revision, machine_description
from triton_kit.benchmarks.harness.memory import ProcessMemory, server_tree_rss

# Engine libraries a process may map, by the file name that shows it in /proc/<pid>/maps.
ENGINE_LIBRARIES = {
    "onnxruntime": "libonnxruntime",
    "onnxruntime (python)": "onnxruntime_pybind11_state",
    "torch": "libtorch_cpu",
    "ctranslate2": "libctranslate2",
}
PYTHON_SEARCH = ("--engine", "onnxruntime", "--search", "python")
# name -> (the model translated, build flags); the Transformer's three layouts, then the RNN's two.
LAYOUTS = {
    "nmt: Python search over ONNX Runtime steps (default before issue 31)": ("nmt", PYTHON_SEARCH),
    "nmt: CTranslate2, the python nmt in front (--no-ct2-text)": (
        "nmt",
        ("--engine", "ctranslate2", "--no-ct2-text"),
    ),
    "nmt: CTranslate2 text mode (the default)": ("nmt", ()),
    "nmt_rnn: Python search over ONNX Runtime steps (default before issue 31)": (
        "nmt_rnn",
        ("--architecture", "rnn", *PYTHON_SEARCH),
    ),
    "nmt_rnn: TorchScript search (the default)": ("nmt_rnn", ("--architecture", "rnn")),
}


@dataclass(frozen=True)
class Layout:
    name: str
    build_args: tuple[str, ...]
    processes: list[ProcessMemory]
    engines: dict[int, list[str]]  # pid -> engine libraries it maps
    models: list[str]


def mapped_engines(pid: int) -> list[str]:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    return [name for name, library in ENGINE_LIBRARIES.items() if library in maps]


def measure_layout(
    name: str, model: str, build_args: tuple[str, ...], work: Path, sentences: list[str]
) -> Layout:
    from triton_kit.build_engines.cli import build_from_argv
    from triton_kit.client import TritonClient
    from triton_kit.server import ServerConfig, TritonServer

    repo = work / "repository"
    build_from_argv(
        [
            "nmt",
            *build_args,
            "--output-repository",
            str(repo),
            "--work-dir",
            str(work / "build"),
            "--verify-sentences",
            "2",
        ]
    )
    models = sorted(p.parent.name for p in repo.glob("*/config.pbtxt"))
    config = ServerConfig(
        model_repository=repo,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=work / "tritonserver.log",
    )
    with TritonServer(config) as server:
        with TritonClient(server.grpc_url, timeout=120) as client:
            for beam in (1, 4):
                for start in range(0, len(sentences), 8):
                    client.translate(sentences[start : start + 8], beam_size=beam, model=model)
        time.sleep(1.0)
        assert server._process is not None
        processes = server_tree_rss(server._process.pid)
        engines = {p.pid: mapped_engines(p.pid) for p in processes}  # while they still run
    return Layout(name, build_args, processes, engines, models)


def report(layouts: list[Layout], command: str, machine: str, load: tuple[float, float]) -> str:
    import datetime

    commit = git_revision()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# NMT: resident memory of the server and its stubs, by layout",
        "",
        "| run |  |",
        "|---|---|",
        f"| machine | {machine} |",
        f"| load | 1-min load average {load[0]:.2f} at start, {load[1]:.2f} at the end; RSS does "
        "not depend on load |",
        f"| command | `{command}` |",
        f"| date | {date} |",
        f"| commit | `{commit}` |",
        "",
        "- Each layout: the nmt number model built alone into its own repository, served by its "
        "own tritonserver, the same held-out sentences translated at beam 1 and 4, then RSS "
        "read over the server's process tree (psutil) and each process's engine libraries "
        "from /proc/<pid>/maps.",
        "",
        "## Summary",
        "",
        "| layout | models | processes | RSS MiB (total) | engine copies |",
        "|---|---|---|---|---|",
    ]
    for layout in layouts:
        copies = sum(len(engines) > 0 for engines in layout.engines.values())
        total = sum(p.rss_mib for p in layout.processes)
        lines.append(
            f"| {layout.name} | {', '.join(layout.models)} | {len(layout.processes)} | "
            f"{total:.0f} | {copies} process(es) mapping an engine |"
        )
    for layout in layouts:
        build = " ".join(layout.build_args) or "(no flags)"
        lines += [
            "",
            f"## {layout.name}",
            "",
            f"`python -m triton_kit.build_engines nmt {build}`",
            "",
        ]
        lines += ["| process | RSS MiB | engine libraries mapped |", "|---|---:|---|"]
        for p in layout.processes:
            engines = ", ".join(layout.engines.get(p.pid, [])) or "none"
            lines.append(f"| {p.label} | {p.rss_mib:.0f} | {engines} |")
        lines.append(f"| **total** | **{sum(p.rss_mib for p in layout.processes):.0f}** | |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.nmt.memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "nmt_memory.md")
    parser.add_argument("--sentences", type=int, default=64, help="held-out sentences translated")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from triton_kit.build_engines.families.nmt import corpus

    args = parse_args(argv)
    command = "python -m triton_kit.benchmarks.nmt.memory " + " ".join(sys.argv[1:])
    sentences = [corpus.english(n) for n in corpus.make_split().test[: args.sentences]]
    start_load = os.getloadavg()[0]
    layouts = []
    with tempfile.TemporaryDirectory(prefix="nmt-memory-") as tmp:
        for i, (name, (model, build_args)) in enumerate(LAYOUTS.items()):
            print(f"[{i + 1}/{len(LAYOUTS)}] {name} ...", flush=True)
            layouts.append(measure_layout(name, model, build_args, Path(tmp) / str(i), sentences))
    text = report(layouts, command.strip(), machine_description(), (start_load, os.getloadavg()[0]))
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
