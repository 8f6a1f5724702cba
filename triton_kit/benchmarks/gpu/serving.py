"""ResNet-50 served on one GPU against the same engine in process, in ONE run (issue 30).

    python -m triton_kit.benchmarks.gpu.serving --out OUT_DIR            # the lent H100
    python -m triton_kit.benchmarks.gpu.serving --out OUT_DIR --smoke    # CPU, tiny model

Three questions, each answered with a baseline measured in the same run:

- **batching**: one-image requests at concurrency 256 (perf_analyzer) against Triton's own
  pytorch backend under several instance counts, queue delays and preferred batch sizes,
  each a model of its own in one bare ``tritonserver``; the ratio is to the best in-process
  throughput of the same TorchScript (eager, and CUDA graph);
- **launcher**: the kit's launcher (``python -m triton_kit.server serve``'s defaults) against
  that bare ``tritonserver`` (same binary, backends, environment and repository; only the
  kit's flags differ), and the launcher with ``--latency-summaries``;
- **batch 1**: one request at a time (perf_analyzer, concurrency 1) against eager batch 1 in
  process: the p50 the serving path adds.

RANDOM weights (speed only). Writes serving.json (after every step) and serving.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from triton_kit.benchmarks.gpu.models import Spec, resnet50_uint8
from triton_kit.benchmarks.gpu.settings import Settings
from triton_kit.benchmarks.harness import perf_analyzer
from triton_kit.benchmarks.harness.measure import git_revision


@dataclass(frozen=True)
class Batching:
    """One served configuration of the same TorchScript."""

    instances: int
    queue_delay_us: int
    preferred: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        pref = "_pref" if self.preferred else ""
        return f"resnet50_i{self.instances}_q{self.queue_delay_us}{pref}"


# The kit's GPU default before this run, issue 30's best bare row, and around them.
DEFAULT_GRID = (
    Batching(4, 100),
    Batching(2, 2000, (64, 128, 256)),
    Batching(4, 2000, (64, 128, 256)),
    Batching(4, 500, (64, 128, 256)),
    Batching(8, 2000, (64, 128, 256)),
    Batching(4, 5000, (128, 256)),
)
SMOKE_GRID = (Batching(1, 100), Batching(2, 500, (2, 4)))


@dataclass(frozen=True)
class Options:
    out: Path
    seconds: float = 4.0
    concurrency: int = 256
    max_batch: int = 256
    smoke: bool = False
    grid: tuple[Batching, ...] = DEFAULT_GRID
    launcher: bool = True  # the launcher rows (and the second bare row)
    engines: bool = False  # also the compiled engines in process (benchmarks.gpu.engines)
    # perf_analyzer's stability (%): at c256 the p99 of a saturated queue swings more than 20%
    # between windows (three rows of the first H100 run never settled).
    stability: int = 50

    @property
    def settings(self) -> Settings:
        device = "cpu" if self.smoke else "cuda"
        return Settings(out=self.out, device=device, seconds=self.seconds, smoke=self.smoke)


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.gpu.serving",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="where serving.md/json go")
    parser.add_argument("--seconds", type=float, default=Options.seconds, help="per window")
    parser.add_argument(
        "--smoke", action="store_true", help="CPU, tiny ResNet, 2 configs: checks the code"
    )
    parser.add_argument(
        "--grid",
        help="served configs as iN_qD[_pref] (instances, queue delay in us, preferred sizes "
        "64,128,256), comma-separated (default: "
        + ",".join(b.name[9:] for b in DEFAULT_GRID)
        + ")",
    )
    parser.add_argument("--no-launcher", action="store_true", help="skip the launcher rows")
    parser.add_argument(
        "--engines", action="store_true", help="also torch.compile and AOTInductor in process"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        return Options(
            args.out, seconds=min(args.seconds, 1.0), concurrency=4, max_batch=8, smoke=True,
            grid=SMOKE_GRID,
        )  # fmt: skip
    grid = tuple(parse_batching(s) for s in args.grid.split(",")) if args.grid else DEFAULT_GRID
    return Options(
        args.out, seconds=args.seconds, grid=grid, launcher=not args.no_launcher,
        engines=args.engines,
    )  # fmt: skip


def parse_batching(text: str) -> Batching:
    """``i8_q2000_pref`` -> Batching(8, 2000, (64, 128, 256))."""
    parts = text.split("_")
    preferred = (64, 128, 256) if parts[2:] == ["pref"] else ()
    return Batching(int(parts[0][1:]), int(parts[1][1:]), preferred)


def spec(options: Options) -> Spec:
    buckets = (1, 64, options.max_batch) if not options.smoke else (1, 4, options.max_batch)
    return Spec("resnet50", {"image": ("UINT8", (224, 224, 3))}, ("logits", 1000), buckets, 1)


def write_repository(repo: Path, module, options: Options) -> None:
    """Each Batching as a model of Triton's pytorch backend over one TorchScript file."""
    import numpy as np
    import torch

    from triton_kit.benchmarks.gpu.models import example
    from triton_kit.build_engines.engines.torchscript import (
        TorchConfigOptions,
        torch_model_config,
        torch_model_files,
    )
    from triton_kit.build_engines.repository import Tensor, enable_dynamic_batching, write_model

    settings, model_spec = options.settings, spec(options)
    rng = np.random.default_rng(0)
    ex = tuple(
        torch.from_numpy(a).to(settings.device) for a in example(model_spec, 2, rng).values()
    )
    with torch.no_grad():
        traced = torch.jit.trace(module, ex, check_trace=False)
    model_pt = Path(tempfile.mkdtemp(prefix="gpu-serving-pt-")) / "model.pt"
    traced.save(str(model_pt))
    base = TorchConfigOptions(
        max_batch_size=options.max_batch, gpu=settings.gpu,
        precision="fp16" if settings.half else "fp32",
    )  # fmt: skip
    inputs = [Tensor("image", "UINT8", (224, 224, 3))]
    outputs = [Tensor("logits", "FP32", (1000,))]
    for batching in options.grid:
        variant = replace(base, instances=batching.instances)
        config = torch_model_config(batching.name, inputs, outputs, variant)
        enable_dynamic_batching(config, batching.queue_delay_us, batching.preferred)
        write_model(repo, config, torch_model_files(model_pt, variant))


def in_process(module, options: Options) -> dict:
    from triton_kit.benchmarks.gpu.load import in_process as timed

    return timed(module, spec(options), spec(options).buckets, options.settings)


class BareServer:
    """The binary, backends and environment the launcher would use, and only the flags a
    user would type: repository, backend directory, ports."""

    def __init__(self, repo: Path, log: Path) -> None:
        self.repo, self.log = repo, log

    def __enter__(self) -> BareServer:
        from triton_kit.server.binary import (
            assemble_backend_dir,
            find_installation,
            server_environment,
        )
        from triton_kit.server.launcher import free_ports, wait_ready

        installation = find_installation()
        self.workdir = Path(tempfile.mkdtemp(prefix="bare-triton-"))
        backends = assemble_backend_dir(installation, self.workdir / "backends")
        http, grpc, metrics = free_ports(3)
        self.http_url, self.grpc_url = f"http://127.0.0.1:{http}", f"grpc://127.0.0.1:{grpc}"
        command = [
            str(installation.binary), f"--model-repository={self.repo}",
            f"--backend-directory={backends}", f"--http-port={http}", f"--grpc-port={grpc}",
            f"--metrics-port={metrics}",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
            env=server_environment(installation),
        )  # fmt: skip
        if not wait_ready(self.http_url, 600):
            self.__exit__()
            raise RuntimeError(f"bare tritonserver not ready; see {self.log}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def measure(url: str, model: str, concurrency: int, options: Options) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        return perf_analyzer.run(
            url, model, concurrency, options.seconds, Path(scratch), stability=options.stability
        )


def run(options: Options) -> dict:
    import torch

    from triton_kit.server import ServerConfig, TritonServer

    options.out.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="gpu-serving-logs-"))
    results: dict = {"env": environment(options), "options": describe(options)}

    def step(name: str, fn: Callable[[], object]) -> None:
        start = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as exc:  # a failed step is recorded, the run goes on
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        print(f"[{name}] {time.perf_counter() - start:.1f} s", flush=True)
        (options.out / "serving.json").write_text(json.dumps(results, indent=1))

    module = resnet50_uint8(options.settings).to(options.settings.device)
    repo = Path(tempfile.mkdtemp(prefix="gpu-serving-repo-"))
    with torch.no_grad():
        step("in_process", lambda: in_process(module, options))
        step("repository", lambda: write_repository(repo, module, options) or {"path": str(repo)})

    def bare() -> dict:
        rows = {}
        with BareServer(repo, logs / "bare-tritonserver.log") as server:
            for batching in options.grid:
                rows[batching.name] = measure(
                    server.grpc_url, batching.name, options.concurrency, options
                )
            best = max(rows, key=lambda n: rows[n].get("items_per_s", 0))
            rows["best"] = best
            rows["bs1_" + best] = measure(server.grpc_url, best, 1, options)
        return rows

    step("bare", bare)
    best = results["bare"].get("best", options.grid[0].name)

    def launched(summaries: bool) -> dict:
        config = ServerConfig(
            model_repository=repo, http_port=0, grpc_port=0, metrics_port=0,
            log_file=logs / f"kit-launcher-summaries-{summaries}.log",
            latency_summaries=summaries,
        )  # fmt: skip
        with TritonServer(config) as server:
            return {best: measure(server.grpc_url, best, options.concurrency, options)}

    if options.launcher:
        step("launcher", lambda: launched(False))
        step("launcher_summaries", lambda: launched(True))
        step("bare_again", lambda: _bare_again(repo, best, options, logs))
    if options.engines:
        step("engines", lambda: _engines(options))
    (options.out / "serving.md").write_text(markdown(results))
    # One file for every server log: a lent machine returns only a few files.
    subprocess.run(["tar", "-C", str(logs), "-cJf", str(options.out / "server-logs.tar.xz"), "."])
    return results


def _bare_again(repo: Path, model: str, options: Options, logs: Path) -> dict:
    """The bare server once more after the launcher rows: the drift between the two bare
    measurements bounds what the launcher comparison can claim."""
    with BareServer(repo, logs / "bare-tritonserver-2.log") as server:
        return {model: measure(server.grpc_url, model, options.concurrency, options)}


def _engines(options: Options) -> dict:
    """In a child process: a compiled engine's crash must not lose the served rows."""
    done = subprocess.run(
        [sys.executable, "-m", "triton_kit.benchmarks.gpu.engines", "--out", str(options.out),
         "--batches", "256"],
        capture_output=True, text=True, timeout=330,
    )  # fmt: skip
    path = options.out / "engines.json"
    found = json.loads(path.read_text()) if path.exists() else {}
    return {**found, "returncode": done.returncode, "tail": (done.stdout + done.stderr)[-1500:]}


def environment(options: Options) -> dict:
    import torch

    gpu = torch.cuda.get_device_name(0) if options.settings.gpu else "cpu"
    return {
        "machine": f"{gpu}; {platform.processor() or platform.machine()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "commit": git_revision(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def describe(options: Options) -> dict:
    return {
        "seconds": options.seconds,
        "concurrency": options.concurrency,
        "max_batch": options.max_batch,
        "grid": [b.name for b in options.grid],
        "perf_analyzer": "one image a request, gRPC, random UINT8 224x224x3",
    }


def _cell(row: dict) -> str:
    if "items_per_s" not in row:
        return f"| - | - | - | - | {str(row.get('error') or row.get('skipped'))[:80]} |"
    server = row.get("server")
    split = (
        f"queue {server['queue_ms']:.1f} ms, infer {server['compute_infer_ms']:.1f} ms"
        if server
        else ""
    )
    return (
        f"| {row['p50']:.2f} | {row['p95']:.2f} | {row['p99']:.2f} "
        f"| {row['items_per_s']:,.0f} | {split} |"
    )


def markdown(results: dict) -> str:
    """The report: one run, its header, every row with its ratio to a baseline of the run."""
    env, opts = results["env"], results["options"]
    engine = results.get("in_process", {})
    best_engine = max((r["items_per_s"] for r in engine.values() if "items_per_s" in r), default=0)
    lines = [
        "# ResNet-50 served on the GPU against the same engine in process",
        "",
        "| run |  |",
        "|---|---|",
        f"| machine | {env['machine']}; Python {env['python']}, torch {env['torch']} |",
        "| command | `python -m triton_kit.benchmarks.gpu.serving --out OUT` |",
        f"| load | {opts['perf_analyzer']}; concurrency {opts['concurrency']}; "
        f"{opts['seconds']} s windows until stable |",
        f"| date | {env['date']} |",
        f"| commit | `{env['commit']}` |",
        "",
        "FP16 TorchScript, random weights. In process: host input and output copies included.",
        "",
        "| path | p50 ms | p95 ms | p99 ms | img/s | Triton's split |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| in process {name} {_cell(row)}" for name, row in engine.items()]
    for section in ("bare", "launcher", "launcher_summaries", "bare_again"):
        for name, row in results.get(section, {}).items():
            if isinstance(row, dict):
                lines.append(f"| {section} {name} {_cell(row)}")
    lines += ["", *ratios(results, best_engine)]
    return "\n".join(lines) + "\n"


def ratios(results: dict, best_engine: float) -> list[str]:
    bare = results.get("bare", {})
    best = bare.get("best")
    out = []
    if best and best_engine:
        rate = bare[best].get("items_per_s", 0)
        out.append(f"- best served ({best}) / best in process: {rate / best_engine:.2f}x")
    for section in ("launcher", "launcher_summaries", "bare_again"):
        row = results.get(section, {}).get(best, {})
        if best and "items_per_s" in row and bare.get(best, {}).get("items_per_s"):
            out.append(
                f"- {section} / bare ({best}): "
                f"{row['items_per_s'] / bare[best]['items_per_s']:.2f}x"
            )
    single = bare.get(f"bs1_{best}", {})
    eager1 = results.get("in_process", {}).get("eager_bs1", {})
    if "p50" in single and "p50" in eager1:
        out.append(
            f"- batch 1: served p50 {single['p50']:.2f} ms - in-process eager p50 "
            f"{eager1['p50']:.2f} ms = {single['p50'] - eager1['p50']:+.2f} ms"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    run(options)
    print((options.out / "serving.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
