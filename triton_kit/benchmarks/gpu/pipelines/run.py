"""What users call, end to end, in one run (issue 30 item 4).

Run on the lent GPU through scripts/gpu/bench.sh (about 4-5 minutes with the defaults)::

    python -m triton_kit.benchmarks.gpu.pipelines --out OUT [--seconds 2] [--tokenizer T]
    python -m triton_kit.benchmarks.gpu.pipelines --out OUT --smoke   # CPU, checks the code

Steps, each guarded (a failure is recorded with its traceback and the run goes on), none
started once ``--budget-s`` is spent, ``pipelines.json`` and ``pipelines.md`` rewritten after
each so a run cut short keeps what it measured:

1. ``build <family>``: the kit's repository, by ``python -m triton_kit.build_engines``
   (``build``): resnet50, bert, nmt as the chosen models need them.
2. ``in-process <model>``: the same pipeline in one process (``local``), batch 1 and the
   largest batch the config allows, before any server holds the GPU.
3. ``served <model>``: the kit's launcher on the built repository, perf_analyzer at each
   concurrency with Triton's statistics per step (``served``), most important model first:
   resnet50 (JPEG ensemble), bert, resnet50_uint8, nmt.
4. ``sdk <model>``: the typed client on resnet50 and bert.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from triton_kit.benchmarks.gpu.pipelines import build, inputs, local, served
from triton_kit.benchmarks.gpu.pipelines.options import FAMILIES, Options, parse
from triton_kit.benchmarks.gpu.pipelines.report import markdown
from triton_kit.benchmarks.gpu.serving import Results
from triton_kit.benchmarks.gpu.settings import Settings

JSON_NAME, REPORT_NAME = "pipelines.json", "pipelines.md"


class Run(Results):
    """serving.Results (the JSON after every step, tracebacks kept) under the time budget,
    with the report rewritten after every step too."""

    def __init__(self, options: Options, env: dict) -> None:
        super().__init__(options.out, env, JSON_NAME)
        self.options = options

    def time_left(self) -> float:
        return self.options.budget_s - (time.perf_counter() - self.started)

    def step(self, name: str, fn: Callable[[], object]) -> object:
        if self.time_left() <= 0:
            self.data.setdefault("skipped", {})[name] = "time budget spent"
            self.save()
            return None
        value = super().step(name, fn)
        self.write_report()
        return value

    def fail(self, name: str) -> None:
        """Record the exception being handled under ``name``."""
        self.data.setdefault("errors", {})[name] = traceback.format_exc()
        print(self.data["errors"][name], flush=True)
        self.save()

    def save(self) -> None:
        self.data["elapsed_s"] = round(time.perf_counter() - self.started)
        self.path.write_text(json.dumps(self.data, indent=2) + "\n")
        self.write_report()

    def write_report(self) -> None:
        text = markdown(self.data, self.options.command)
        (self.options.out / REPORT_NAME).write_text(text)


def run(options: Options) -> dict:
    from triton_kit.benchmarks.gpu.run import environment
    from triton_kit.build_engines.engines.torchscript.script import gpu_visible

    gpu = gpu_visible()
    settings = Settings(out=options.out, device="cuda" if gpu else "cpu", smoke=options.smoke)
    results = Run(options, environment(settings))
    results.data["settings"] = {
        "seconds": options.seconds,
        "stability": options.stability,
        "budget_s": options.budget_s,
        "models": list(options.models),
    }
    scratch = Path(tempfile.mkdtemp(prefix="pipelines-"))  # the repository stays off OUT
    try:
        repo = scratch / "repository"
        built = build_all(results, options, repo, scratch / "work", gpu)
        pools = request_pools(results, built, options, scratch / "inputs")
        for model, requests in pools.items():
            results.step(
                f"in-process {model}",
                lambda r=requests: local.measure_model(r.model, repo, r.items, options.seconds),
            )
        serve_all(results, options, repo, pools)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results.save()
    return results.data


def build_all(results: Run, options: Options, repo: Path, work: Path, gpu: bool) -> list[str]:
    """Each family the models need; the models whose family built."""
    for family in options.families:
        command = build.plan(family, options, repo, work, gpu)
        log = options.out / f"build-{family}.log"
        results.step(f"build {family}", lambda c=command, lg=log: build.run_build(c, lg))
    return [m for m in options.models if results.data.get(f"build {FAMILIES[m]}")]


def request_pools(
    results: Run, models: list[str], options: Options, folder: Path
) -> dict[str, inputs.Requests]:
    pools: dict[str, inputs.Requests] = {}
    for model in models:

        def make(m: str = model) -> dict:
            pools[m] = inputs.requests(m, options.smoke, folder)
            return {"items": len(pools[m].items), "input_file": Path(pools[m].input_file).name}

        results.step(f"inputs {model}", make)
    return pools


def serve_all(
    results: Run, options: Options, repo: Path, pools: dict[str, inputs.Requests]
) -> None:
    """One server for every model: perf_analyzer per model in order, then the SDK."""
    if not pools or results.time_left() <= 0:
        return
    try:
        with served.server(repo, options.out) as url:
            for model, requests in pools.items():
                results.step(
                    f"served {model}",
                    lambda r=requests: served.perf_levels(url, r, options, repo, results.time_left),
                )
            for model in served.SDK_METHODS if options.sdk else ():
                if model in pools:
                    results.step(
                        f"sdk {model}", lambda r=pools[model]: served.sdk_pass(url, r, options)
                    )
    except Exception:
        results.fail("server")


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    run(options)
    print((options.out / REPORT_NAME).read_text(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
