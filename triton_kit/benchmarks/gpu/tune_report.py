"""benchmarks/results/tune_gpu.md from one ``scripts/gpu/tune.sh`` call's files.

``python -m triton_kit.benchmarks.gpu.tune_report FILES --out benchmarks/results/tune_gpu.md``
where FILES holds what the call left in its OUT: ``tune.tar.gz`` (each model's tune run:
summary.json, summary.md and the throughput-against-p99 plot), ``nvidia-smi.txt`` and
``versions.txt``. The page heads the run (device command, commit, GPU, date) and sets each
model's chosen config beside the config as built, both measured in the same run, then
keeps tune's own summary per model; the plots go beside the page (``tune_gpu/``).
"""

from __future__ import annotations

import argparse
import json
import re
import tarfile
from pathlib import Path

MODELS = ("resnet50_model", "bert_model")
DEVICE_COMMAND = (
    "TRITON_KIT_GPU_NATIVE=pytorch TRITON_KIT_GPU_AOTI=0 "
    'bash scripts/gpu/bench.sh .whl-tune "$OUT" --script scripts/gpu/tune.sh'
)


def read_runs(archive: Path) -> dict[str, dict]:
    """Each model's summary.json, summary.md and plot, by model, from tune.tar.gz."""
    runs: dict[str, dict] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            match = re.fullmatch(
                r"(?:\./)?runs/([^/]+)/(summary\.json|summary\.md|\1\.png)", member.name
            )
            if not match or not member.isfile():
                continue
            data = tar.extractfile(member)
            assert data is not None
            runs.setdefault(match.group(1), {})[match.group(2)] = data.read()
    return runs


def gpu_name(smi: str) -> str:
    names = re.findall(r"NVIDIA [A-Z]\d+[^|]*?(?=\s{2,}|\|)", smi)
    driver = re.search(r"Driver Version: (\S+)", smi)
    name = names[0].strip() if names else "?"
    return f"{name}, driver {driver.group(1)}" if driver else name


def _best(config: dict) -> dict | None:
    return config.get("best")


def _cell(best: dict | None) -> tuple[str, str, str]:
    if best is None:
        return "over the SLO", "—", "—"
    return f"{best['throughput']:,.0f}", f"{best['p99_ms']:.1f}", str(best["concurrency"])


def comparison(models: dict[str, dict]) -> list[str]:
    """The chosen config beside the config as built, per model."""
    lines = [
        "| model | limit | chosen config | infer/s | p99 ms | at concurrency | as built | "
        "infer/s | p99 ms | at concurrency | chosen / as built |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, run in models.items():
        summary = run["summary"]
        entry = summary["models"][model]
        configs = {c["config"]: c for c in entry["configs"]}
        fields = entry["fields"]
        default = next((c for c in entry["configs"] if c["as_built"]), None)
        chosen = configs.get(entry["chosen"]) if entry["chosen"] else None
        limit = summary["run"].get("limits", "?")
        built = f"{fields.get(default['config'], '?')}" if default is not None else "not profiled"
        built_cells = _cell(_best(default)) if default is not None else ("—", "—", "—")
        if chosen is None:
            lines.append(
                f"| `{model}` | {limit} | none: {entry['failure']} | — | — | — | {built} | "
                f"{' | '.join(built_cells)} | — |"
            )
            continue
        label = "the config as built" if chosen["as_built"] else f"`{chosen['config']}`"
        ratio = "—"
        if default is not None and _best(default) and chosen["best"]:
            ratio = f"{chosen['best']['throughput'] / default['best']['throughput']:.2f}"
        lines.append(
            f"| `{model}` | {limit} | {label}: {fields.get(chosen['config'], '?')} | "
            f"{' | '.join(_cell(chosen['best']))} | {built} | {' | '.join(built_cells)} "
            f"| {ratio} |"
        )
    return lines


def tune_section(model: str, markdown: str, plot: str | None) -> list[str]:
    """tune's own summary.md for one model, its headings one level down, its header list and
    links to files not committed left out."""
    out = []
    body = markdown.split(f"## {model}", 1)[-1].splitlines()
    for line in body:
        if line.startswith("- Model Analyzer's") or line.startswith("![throughput"):
            continue
        out.append(line)
    if plot:
        out += ["", f"![{model}: throughput against p99]({plot})"]
    return [f"### {model}", *out]


def _versions(path: Path) -> str:
    if not path.is_file():
        return "?"
    return "; ".join(line.strip() for line in path.read_text().splitlines() if line.strip())


def render(files: Path, out: Path, device_command: str) -> str:
    runs = read_runs(files / "tune.tar.gz")
    done = {m: r for m, r in runs.items() if "summary.json" in r}
    models = {m: {"summary": json.loads(done[m]["summary.json"])} for m in MODELS if m in done}
    smi = files / "nvidia-smi.txt"
    versions = files / "versions.txt"
    first = next(iter(models.values()), None)
    run = first["summary"]["run"] if first else {}
    lines = [
        "# `loadtest tune` on the lent GPU: the chosen config beside the config as built",
        "",
        "| run |  |",
        "|---|---|",
        f"| device command | `{device_command}` (scripts/gpu/tune.sh) |",
        f"| GPU | {gpu_name(smi.read_text()) if smi.is_file() else '?'} |",
        f"| machine | {run.get('machine', '?')} |",
        f"| versions | {_versions(versions)} |",
        f"| commit | `{run.get('commit', '?')}` |",
        f"| date | {run.get('date', '?')} |",
    ]
    for model, entry in models.items():
        command = entry["summary"]["run"].get("command", "?")
        lines.append(f"| command ({model}) | `{command}` |")
    if first:
        lines.append(f"| measurement | {run.get('measurement', '?')} |")
    missing = [m for m in MODELS if m not in models]
    lines += ["", "## Chosen vs as built", ""]
    if models:
        lines += comparison(models)
    if missing:
        lines += [
            "",
            f"Not tuned in this run (cut short or failed; see run.log): {', '.join(missing)}.",
        ]
    lines += [
        "",
        "Both columns were measured in the same run, by the same Model Analyzer search: the as "
        "built column is `<model>_config_default`. *chosen / as built* divides their best "
        "throughputs within the limit.",
        "",
        "## What tune wrote, per model",
        "",
    ]
    plots = out.parent / out.stem
    for model in models:
        plot_bytes = done[model].get(f"{model}.png")
        plot = None
        if plot_bytes:
            plots.mkdir(parents=True, exist_ok=True)
            (plots / f"{model}.png").write_bytes(plot_bytes)
            plot = f"{plots.name}/{model}.png"
        lines += tune_section(model, done[model]["summary.md"].decode(), plot)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m triton_kit.benchmarks.gpu.tune_report")
    p.add_argument("files", type=Path, help="the call's OUT files (tune.tar.gz, nvidia-smi.txt)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/tune_gpu.md"))
    p.add_argument("--device-command", default=DEVICE_COMMAND)
    args = p.parse_args(argv)
    text = render(args.files, args.out, args.device_command)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
