"""The steps in order, the results file rewritten after each (a run cut short keeps what it
measured), and the command's ``main``.
"""

from __future__ import annotations

import json
import tempfile
from functools import partial
from pathlib import Path

from triton_kit.benchmarks.gpu.aoti.build import built
from triton_kit.benchmarks.gpu.aoti.in_process import first_calls, in_process
from triton_kit.benchmarks.gpu.aoti.options import Options, parse
from triton_kit.benchmarks.gpu.aoti.repository import torchscript_baseline, write_repository
from triton_kit.benchmarks.gpu.aoti.served import served
from triton_kit.benchmarks.gpu.serving import Results


def run(options: Options) -> dict:
    import torch

    settings, spec = options.settings, options.spec
    env = {"family": options.family, "device": settings.device}
    env |= {"graph_sizes": list(options.graph_sizes)} if options.graphed_anywhere else {}
    results = Results(options.out, env, name=spec.report)
    torch.manual_seed(0)  # the same weights in every run: a reused package matches the baseline
    module = spec.make(settings).to(settings.device).eval()
    folder = options.package_dir or Path(tempfile.mkdtemp(prefix="aoti-pkg-"))
    folder.mkdir(parents=True, exist_ok=True)
    package = folder / f"{spec.prefix}.pt2"
    baseline = options.with_baseline and not options.build_only
    model_pt = torchscript_baseline(module, settings) if baseline else Path()
    results.step("build", lambda: built(module, package, options))
    if options.build_only:
        return results.data
    graphs = options.graphed_anywhere
    if not results.step("in_process", lambda: in_process(package, spec, settings, graphs)):
        return results.data
    if options.first_calls:
        results.step("first_calls", lambda: first_calls(package, spec, settings))
    if settings.gpu:
        torch.cuda.empty_cache()
    repo = Path(tempfile.mkdtemp(prefix="aoti-repo-"))
    names = results.step(
        "repository", lambda: write_repository(repo, package, model_pt, settings, options)
    )
    if settings.gpu:
        torch.cuda.empty_cache()
    if names:
        reference = Path(str(package) + ".ref")
        record = partial(results.record, "served")
        results.step("served", lambda: served(repo, names, options, reference, record))
    return results.data


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    data = run(options)
    print(json.dumps({k: v for k, v in data.items() if k != "errors"}, default=str)[:6000])
    return 0
