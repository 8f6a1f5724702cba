"""benchmarks/results/gpu.md from one run of scripts/gpu/goals.sh: every goal of issue 30,
each ratio within one step of the run.

    python -m triton_kit.benchmarks.gpu.goals_report CALL [CALL ...] --out gpu.md --raw DIR

A run is one or more device calls (all steps outlast one); each ``CALL`` is a call's output
folder, holding the steps it ran: ``resnet50/aoti.json``, ``bert-base/aoti-bert-base.json``,
``bert-large/aoti-bert-large.json`` (``python -m triton_kit.benchmarks.gpu.aoti``),
``pipelines/pipelines.json``, ``launcher/serving.json``, ``pytest/run.log``, with goals.sh's
``env.json`` and step lines (``run.log``). A goal the run could not measure (the launcher on
CPU, the tune) names the other run its figure comes from. ``--notes`` appends a hand-written
reading of the figures under its own heading.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.gpu.aoti import report as aoti_report
from triton_kit.benchmarks.gpu.pipelines.options import GOALS as PIPELINE_GOALS
from triton_kit.benchmarks.launcher import summarise

STEP_LINE = re.compile(r"^\[goals (\d\d:\d\d:\d\d)\]")
STEP_EXIT = re.compile(r"^\[goals [\d:]+\] ([\w-]+): exit (\d+)")
DEADLINE_EXIT = 124  # timeout(1)'s status: goals.sh stopped the step at the call's deadline
LAUNCHER_ROW = re.compile(r"^(bare|launcher) (\{.*\})$")  # benchmarks.launcher.compare's lines
LAUNCHER_CSV = re.compile(r"^perf_analyzer-(?P<model>.+)-c(?P<concurrency>\d+)\.csv$")
FAMILIES = {  # folder: (title, report file, concurrency of the goal's load, goal)
    "resnet50": ("ResNet-50", "aoti.json", 256, 0.9),
    "bert-base": ("BERT-base", "aoti-bert-base.json", 64, 0.85),
    "bert-large": ("BERT-large", "aoti-bert-large.json", 64, 0.9),
}  # BERT: seq 128, one sequence a request
LAUNCHER_GOAL = 0.97
BATCH_ONE_MS = 0.3
RESNET_RATE = 15_000
GPU_NAME = re.compile(r"\b[A-Z]\d{2,3}\b")  # "NVIDIA H100 80GB HBM3" -> H100


@dataclass(frozen=True)
class Calls:
    """The run's device calls, in order, each an output folder holding some steps."""

    folders: tuple[Path, ...]

    def step(self, name: str) -> Path:
        """The folder of step ``name``: the last call's that ran it."""
        ran = [folder / name for folder in self.folders if (folder / name).is_dir()]
        return ran[-1] if ran else self.folders[0] / name


@dataclass(frozen=True)
class Config:
    """One served config's loads at the goal's concurrency, one way of sending the inputs, in
    the order measured."""

    model: str
    way: str | None  # aoti_report.WAYS: None (inline), "system" or "cuda"
    asynchronous: bool  # perf_analyzer --async (a load ``..._async``)
    rates: tuple[float, ...]
    best: float  # the in-process best it is compared with
    # Each load's rows per execution (Triton's counts; None where the run predates them).
    batches: tuple[float | None, ...] = ()

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(rate / self.best for rate in self.rates)


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def family_data(calls: Calls, folder: str) -> dict:
    """A family step's results, with the served rows that only its log holds where the call's
    deadline stopped it (benchmarks.gpu.aoti writes them into its JSON when the whole served
    step ends)."""
    step = calls.step(folder)
    data = load(step / FAMILIES[folder][1])
    log = step / "run.log"
    if not data or not log.exists():
        return data
    return {**data, "served": aoti_report.served_rows(data, log)}


def configs(data: dict, concurrency: int) -> list[Config]:
    """Each served model's loads at ``concurrency``, per way of sending the inputs and client
    mode (every repeat)."""
    measured = {k: v for k, v in (data.get("in_process") or {}).items() if k.startswith("bs")}
    if not measured:
        return []
    best = max(row["items_per_s"] for row in measured.values())
    found: dict[tuple[str, str | None, bool], list[dict]] = {}
    for key, row in (data.get("served") or {}).items():
        match = aoti_report.LOAD.match(key)
        if match and int(match["concurrency"]) == concurrency and "items_per_s" in row:
            config = (match["model"], match["shm"], match["client"] == "_async")
            found.setdefault(config, []).append(row)
    return [
        Config(*config, tuple(r["items_per_s"] for r in rows), best,
               tuple((r.get("server") or {}).get("rows_per_execution") for r in rows))
        for config, rows in found.items()
    ]  # fmt: skip


def gathered(config: Config) -> bool:
    """Served with Triton's gather kernel (a ``..._gN`` model)."""
    match = aoti_report.MODEL.search(config.model)
    return bool(match and match["gather"])


def best_config(found: list[Config]) -> Config | None:
    """The config with the highest median: what a tune would keep."""
    return max(found, key=lambda c: statistics.median(c.rates), default=None)


def verdict(values: tuple[float, ...], bound: float) -> str:
    """Met in every load, in every load after a fresh server's first (which pays each
    instance's first call at every batch size), or not."""
    if values and min(values) >= bound:
        return "yes"
    if len(values) > 1 and min(values[1:]) >= bound:
        return "after the first load"
    return "no"


@dataclass(frozen=True)
class BatchOne:
    """A family's batch-1 gap (ms): the served c1 p50 less the in-process batch-1 p50, each the
    fastest way; the protocol's part of it (the served c1 less the C API row, Triton inside
    perf_analyzer), where measured, and which protocol served fastest; whether the fastest
    served model had no batcher; the gap over unary gRPC, the default way, where another way
    was the fastest."""

    added: float
    outside: float | None = None
    direct: bool = False
    protocol: str = "gRPC"
    unary: float | None = None


def batch_one(data: dict) -> BatchOne | None:
    in_process, rows = data.get("in_process") or {}, data.get("served") or {}
    served = aoti_report.batch_one(in_process, rows)
    if served is None:
        return None
    inside = aoti_report.batch_one(in_process, rows, c_api=True)
    found = aoti_report.batch_one_rows(rows)
    fastest = min(found, key=found.__getitem__)  # batch_one found some
    protocol = aoti_report.protocol_of(fastest)
    unary = [p50 for key, p50 in found.items() if aoti_report.protocol_of(key) == "gRPC"]
    return BatchOne(served[0] - served[1], served[0] - inside[0] if inside else None,
                    "_direct" in fastest, protocol,
                    min(unary) - served[1] if unary and protocol != "gRPC" else None)  # fmt: skip


def batch_one_text(title: str, gap: BatchOne) -> str:
    """``title +0.248 ms (HTTP, whose part was 0.080; unary gRPC +0.298; no batcher)``: to the
    µs the verdict reads, the fastest protocol and the part it took, what unary gRPC (the
    default way) added where another way was faster, and the batch-1 model's setting where it
    is not the build's (behind the no-delay batcher)."""
    notes = [] if gap.outside is None else [f"{gap.protocol}, whose part was {gap.outside:.3f}"]
    notes += [] if gap.unary is None else [f"unary gRPC {gap.unary:+.3f}"]
    notes += ["no batcher"] if gap.direct else []
    return f"{title} {gap.added:+.3f} ms" + (f" ({'; '.join(notes)})" if notes else "")


def pipeline_ratio(data: dict, model: str) -> tuple[float, float, float] | None:
    """(served items/s at the highest concurrency, in-process at the largest batch, ratio)."""
    served = [(int(k.removeprefix("c")), r) for k, r in (data.get(f"served {model}") or {}).items()
              if "items_per_s" in r]  # fmt: skip
    local = data.get(f"in-process {model}") or {}
    largest = local.get(f"bs{local.get('max_batch')}")
    if not served or not largest:
        return None
    top = max(served)[1]["items_per_s"]
    return top, largest["items_per_s"], top / largest["items_per_s"]


def ratios_text(config: Config) -> str:
    each = ", ".join(f"{r:.3f}×" for r in config.ratios)  # 0.895 is not 0.90
    rates = ", ".join(f"{rate:,.0f}" for rate in config.rates)
    setting = f"{aoti_report.describe(config.model)}, {aoti_report.WAYS[config.way]}"
    setting += ", async client" if config.asynchronous else ""
    if config.batches and None not in config.batches:
        setting += f"; batches of {', '.join(f'{b:.1f}' for b in config.batches)} rows"
    return f"{each} ({rates} against {config.best:,.0f}/s; {setting})"


def launcher_result(folder: Path) -> dict:
    """The launcher step's result: its ``serving.json``, or, where the step stopped before it
    wrote one (a call's deadline), its complete rounds (a bare and a launcher row each) read
    back from its log, the model and concurrency from perf_analyzer's file name, with
    ``cut_short``."""
    found = load(folder / "serving.json").get("launcher")
    if found:
        return found
    rows: dict[str, list[dict]] = {"bare": [], "launcher": []}
    for line in _lines(folder / "run.log"):
        if match := LAUNCHER_ROW.match(line):
            rows[match[1]].append(json.loads(match[2]))
    complete = min(len(runs) for runs in rows.values())
    names = [
        m for path in folder.glob("perf_analyzer-*.csv") if (m := LAUNCHER_CSV.match(path.name))
    ]
    if not complete or not names:
        return {}
    return {
        "model": names[0]["model"],
        "concurrency": int(names[0]["concurrency"]),
        **summarise({kind: runs[:complete] for kind, runs in rows.items()}),
        "cut_short": True,
    }


def launcher_text(launcher: dict) -> str:
    over = launcher.get("launcher_over_bare")
    if not over:
        return "not measured"
    medians = launcher.get("median_items_per_s") or {}
    rounds = len((launcher.get("runs") or {}).get("bare") or [])
    text = (
        f"{over:.2f} ({medians.get('launcher', 0):,.0f} against {medians.get('bare', 0):,.0f} "
        f"img/s, medians of {rounds} alternating round{'s' * (rounds != 1)} each"
    )
    if launcher.get("cut_short"):
        text += "; the step stopped before it wrote its JSON, and its unfinished round is left out"
    return text + ")"


def goal_rows(calls: Calls) -> list[tuple[str, str, str]]:
    rows = []
    families = {folder: family_data(calls, folder) for folder in FAMILIES}
    for folder, (title, _, concurrency, goal) in FAMILIES.items():
        found = configs(families[folder], concurrency)
        best = best_config(found)
        plain = best_config([c for c in found if not gathered(c)])
        if best is None:
            rows.append((f"{title} c{concurrency} ≥ {goal}× in process", "not measured", "no"))
            continue
        text = ratios_text(best)
        if plain is not None and plain != best:
            text += f"; without the gather kernel {ratios_text(plain)}"
        rows.append((f"{title} c{concurrency} ≥ {goal}× in process", text,
                     verdict(best.ratios, goal)))  # fmt: skip
        if folder == "resnet50" and plain is not None:
            rates = ", ".join(f"{rate:,.0f}" for rate in plain.rates)
            rows.append((f"ResNet-50 c256 ≥ {RESNET_RATE:,} img/s", rates,
                         verdict(plain.rates, RESNET_RATE)))  # fmt: skip
    gaps = {FAMILIES[folder][0]: batch_one(data) for folder, data in families.items()}
    text = ", ".join(batch_one_text(t, gap) for t, gap in gaps.items() if gap is not None)
    met = [gap.added <= BATCH_ONE_MS for gap in gaps.values() if gap is not None]
    rows.append((f"batch 1: ≤ {BATCH_ONE_MS} ms added p50", text or "not measured",
                 f"{sum(met)} of {len(met)}"))  # fmt: skip
    pipelines = load(calls.step("pipelines") / "pipelines.json")
    for model in ("resnet50", "bert"):
        found_ratio = pipeline_ratio(pipelines, model)
        goal = PIPELINE_GOALS[model]
        label = f"`{model}` ({'JPEG ensemble' if model == 'resnet50' else 'text'}) ≥ {goal}×"
        if found_ratio is None:
            rows.append((label, "not measured", "no"))
            continue
        served, local, ratio = found_ratio
        rows.append((label, f"{ratio:.2f}× ({served:,.0f} against {local:,.0f} items/s)",
                     "yes" if ratio >= goal else "no"))  # fmt: skip
    launcher = launcher_result(calls.step("launcher"))
    over = launcher.get("launcher_over_bare")
    rows.append((f"launcher ≥ {LAUNCHER_GOAL}× bare `tritonserver` (GPU)", launcher_text(launcher),
                 "yes" if over and over >= LAUNCHER_GOAL else "no"))  # fmt: skip
    return rows


def gpus(calls: Calls) -> list[str]:
    """Each GPU the run's calls ran on, in order of first use: a call that names no machine
    kind may get an H200 where the others got an H100 (session 45)."""
    named = [load(folder / "env.json").get("gpu") for folder in calls.folders]
    named = named if any(named) else [load(calls.step("pipelines") / "pipelines.json")
                                      .get("env", {}).get("gpu")]  # fmt: skip
    return list(dict.fromkeys(gpu for gpu in named if gpu))


def title(calls: Calls) -> str:
    names = [m[0] if (m := GPU_NAME.search(gpu)) else gpu for gpu in gpus(calls)]
    names = list(dict.fromkeys(names)) or ["GPU"]
    if len(names) == 1:
        return f"# Issue 30's goals on the {names[0]}, in one run"
    return f"# Issue 30's goals on the {' and the '.join(names)} (calls on different GPUs)"


def header(calls: Calls, command: str, raw: str) -> list[str]:
    env = {**load(calls.step("pipelines") / "pipelines.json").get("env", {}),
           **load(calls.folders[0] / "env.json")}  # fmt: skip
    machine = (
        f"{', '.join(gpus(calls)) or '?'}; Python {env.get('python', '?')}, "
        f"torch {env.get('torch', '?')}, "
        f"CUDA {env.get('cuda', '?')}; Triton 2.51.0 (the nvidia-pytriton 0.7.0 binary) with "
        "Triton's pytorch backend built there: r24.10 for TorchScript, the kit's build of r26 as "
        "`pytorch_aoti` for AOTInductor"
    )
    tests = [ln for ln in _lines(calls.step("pytest") / "run.log") if " passed" in ln]
    rows = {"machine": machine, "command": f"`{command}`", "raw": raw,
            "tests there": f"`tests/integration/server/test_aoti_backend.py`: {tests[-1]}"
            if tests else ""}  # fmt: skip
    lines = ["| run | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows.items() if value]
    calls_text = map(call_text, calls.folders)
    return lines + [f"| call {n} | {text} |" for n, text in enumerate(calls_text, 1)]


def call_text(folder: Path) -> str:
    """When a device call ran, at which commit, on which GPU and host CPU, and which steps,
    from goals.sh's env.json and step lines."""
    env = load(folder / "env.json")
    date = (env.get("date") or "?")[:10]
    times = [m[1] for line in _lines(folder / "run.log") if (m := STEP_LINE.match(line))]
    steps = [step_text(m[1], int(m[2]))
             for line in _lines(folder / "run.log") if (m := STEP_EXIT.match(line))]  # fmt: skip
    span = f"{date} {times[0]}–{times[-1]} UTC" if times else date
    commit = f" at `{env['commit']}`" if env.get("commit") else ""
    host = " with ".join(env[key] for key in ("gpu", "cpu") if env.get(key))
    where = f" on {host}" if host else ""
    return f"{span}{commit}{where}: {', '.join(steps) or 'no step ended'}"


def step_text(name: str, status: int) -> str:
    if status == DEADLINE_EXIT:
        return f"{name} (stopped at the call's deadline)"
    return f"{name} (exit {status})" if status else name


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def family_section(calls: Calls, folder: str) -> list[str]:
    """The family's own report (aoti_report), its headings one level down."""
    title = FAMILIES[folder][0] + (", seq 128" if folder.startswith("bert") else "")
    data = family_data(calls, folder)
    if not data:
        return [f"## {title}", "", "Not measured in this run.", ""]
    text = aoti_report.render(data, data.get("served") or {}, {})
    lines: list[str] = []
    for line in text.splitlines()[1:]:
        if line.startswith("| run |") or line == "|---|---|" or (not line and lines[-1:] == [""]):
            continue  # the run's header is this report's
        lines.append("#" + line if line.startswith("## ") else line)
    return [f"## {title}: the AOTInductor package through `pytorch_aoti`", *lines, ""]


def pipelines_section(calls: Calls) -> list[str]:
    text = _lines(calls.step("pipelines") / "pipelines.md")
    start = next((i for i, ln in enumerate(text) if ln == "## Summary"), None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(text)) if text[i].startswith("## ")), len(text))
    return ["## What users call: the ensembles against their pipelines in process", "",
            "The kit's own builds (`--engine torch`, FP16 TorchScript through Triton's pytorch "
            "backend); the full report is `pipelines/pipelines.md` in the raw folder.",
            *text[start + 1 : end], ""]  # fmt: skip


def launcher_section(calls: Calls) -> list[str]:
    launcher = launcher_result(calls.step("launcher"))
    runs = launcher.get("runs") or {}
    if not runs:
        return []
    lines = ["## The kit's launcher against a bare `tritonserver`", "",
             f"The same repository (`{launcher.get('model')}`: TorchScript, Triton's pytorch "
             "backend, 4 instances), one-image requests at "
             f"c{launcher.get('concurrency')}, rounds alternating bare and launcher.", "",
             "| server | round | img/s | p50 ms | p99 ms |", "|---|---|---|---|---|"]  # fmt: skip
    for kind, rounds in runs.items():
        for number, row in enumerate(rounds, 1):
            if "items_per_s" in row:
                lines.append(f"| {kind} | {number} | {row['items_per_s']:,.0f} | "
                             f"{row['p50']:.2f} | {row['p99']:.2f} |")  # fmt: skip
    return [*lines, ""]


def cpu_launcher() -> str:
    """``launcher_cpu.md`` with the ratio it reports now, read rather than copied here."""
    path = RESULTS / "launcher_cpu.md"
    text = path.read_text() if path.exists() else ""
    found = re.search(r"\*\*launcher / bare = ([\d.]+)\*\*", text)
    return f"`launcher_cpu.md`: {found[1]}" if found else "`launcher_cpu.md`"


def render(calls: Calls, command: str, raw: str, notes: str = "") -> str:
    lines = [title(calls), "", *header(calls, command, raw), ""]
    lines += ["## Against the goals", "", "| goal | this run | met |", "|---|---|---|"]
    lines += [f"| {goal} | {text} | {met} |" for goal, text, met in goal_rows(calls)]
    lines += [
        "",
        "Every ratio is served items/s over the same engine's best in process (its largest "
        "batch, host copies included), both from one step of this run. *After the first load*: "
        "met in every load but a fresh server's first, which pays each instance's first call "
        "at every batch size (cuDNN's per-thread plans; "
        "`gpu_aoti/call26-resnet50-first-calls.md`). Not in this run: the launcher on CPU "
        f"({cpu_launcher()}) and `loadtest tune` on the H100 (`tune_gpu.md`).",
        "",
    ]
    for folder in FAMILIES:
        lines += family_section(calls, folder)
    lines += pipelines_section(calls)
    lines += launcher_section(calls)
    if notes:
        lines += ["## Reading the figures", "", notes.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m triton_kit.benchmarks.gpu.goals_report",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument(
        "calls", type=Path, nargs="+", help="each device call's output folder (goals.sh's OUT)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--raw", default="", help="where the run's files are kept (header)")
    parser.add_argument(
        "--command",
        default="bash scripts/gpu/bench.sh .whl-goals OUT --script scripts/gpu/goals.sh",
        help="the command that made the run (header)",
    )
    parser.add_argument("--notes", type=Path, help="a markdown file: the reading of the figures")
    args = parser.parse_args(argv)
    notes = args.notes.read_text() if args.notes else ""
    args.out.write_text(render(Calls(tuple(args.calls)), args.command, args.raw, notes))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
