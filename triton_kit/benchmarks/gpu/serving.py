"""Issue 30 in one GPU run: the engine in process, the launcher row, and served batching.

    python -m triton_kit.benchmarks.gpu.serving --out OUT [--seconds 2] [--smoke]

Steps, in order of what matters most (``serving.json`` is rewritten after each, so a run
cut short keeps what it measured):

1. ``engines``: ResNet-50 FP16 (UINT8 NHWC input, random weights) in process at batch
   1/64/256: eager TorchScript, the same under a CUDA graph, channels_last TorchScript
   (eager and graph).
2. ``launcher``: the kit's launcher against a bare tritonserver, one model, c256
   (triton_kit.benchmarks.launcher).
3. ``served``: one-image requests at c256 through perf_analyzer, Triton's own pytorch
   backend at 1/2/4 instances x (queue delay 100 us | 2000 us with preferred 64/128/256),
   channels_last TorchScript, and the CUDA-graph python model; batch 1 at c1.
4. ``compiled``: torch.compile (``--compile-mode``; channels_last) in process.
5. ``aoti``: an AOTInductor package built and loaded in a child process under
   faulthandler (static batch), its output and exit status recorded.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks.gpu.families import BUCKETS
from triton_kit.benchmarks.gpu.load import in_process
from triton_kit.benchmarks.gpu.models import Spec, example, resnet50_uint8
from triton_kit.benchmarks.gpu.settings import Settings
from triton_kit.benchmarks.launcher import measure

RESNET = Spec("resnet50_u8", {"image": ("UINT8", (224, 224, 3))}, ("logits", 1000), BUCKETS, 4)
PREFERRED = (64, 128, 256)


@dataclass(frozen=True)
class Variant:
    """One served configuration of the same TorchScript."""

    name: str
    instances: int
    queue_delay_us: int
    preferred: tuple[int, ...] = ()
    channels_last: bool = False
    cuda_graphs: bool = False
    frozen: bool = False
    compiled: bool = False  # the CompiledModel python model on model.pt2

    @property
    def engine(self) -> str:
        if self.compiled:
            return "exported_cl"
        return (
            "torchscript"
            + ("_cl" if self.channels_last else "")
            + ("_frozen" if self.frozen else "")
        )


def variants(smoke: bool) -> tuple[Variant, ...]:
    if smoke:
        return (Variant("native_i1_d100", 1, 100), Variant("native_i1_d2000p", 1, 2000, PREFERRED))
    grid = [Variant("native_i4_d100", 4, 100)]  # the build's old default batching
    grid += [Variant(f"native_i{n}_d2000p", n, 2000, PREFERRED) for n in (1, 2, 4)]
    grid += [
        Variant("native_cl_i4_d2000p", 4, 2000, PREFERRED, channels_last=True),
        Variant("graphs_cl_i2_d2000p", 2, 2000, PREFERRED, channels_last=True, cuda_graphs=True),
        Variant("native_clf_i4_d2000p", 4, 2000, PREFERRED, channels_last=True, frozen=True),
        Variant("native_clf_i2_d2000p", 2, 2000, PREFERRED, channels_last=True, frozen=True),
        Variant("graphs_clf_i2_d2000p", 2, 2000, PREFERRED, True, True, frozen=True),
        Variant("compiled_i2_d2000p", 2, 2000, PREFERRED, True, True, compiled=True),
    ]
    return tuple(grid)


@dataclass(frozen=True)
class Options:
    out: Path
    seconds: float
    smoke: bool
    compile_mode: str
    steps: tuple[str, ...]
    variants: tuple[str, ...] = ()  # served variants by name; () for all
    launcher_rounds: int = 2  # bare/launcher pairs of the launcher step

    @property
    def settings(self) -> Settings:
        return Settings(
            out=self.out, device="cpu" if self.smoke else "cuda", seconds=self.seconds,
            smoke=self.smoke, processes=2 if self.smoke else 8,
        )  # fmt: skip

    @property
    def concurrency(self) -> int:
        return 2 if self.smoke else 256


STEPS = ("engines", "launcher", "served", "compiled", "aoti")


def parse(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model: checks the code")
    parser.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--variants", default="", help="served variants by name (default all)")
    parser.add_argument(
        "--launcher-rounds", type=int, default=Options.launcher_rounds,
        help="bare/launcher pairs of the launcher step, alternating (default %(default)s)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.launcher_rounds < 1:
        parser.error("--launcher-rounds must be at least 1")
    steps = tuple(s for s in args.steps.split(",") if s)
    names = tuple(v for v in args.variants.split(",") if v)
    return Options(args.out, args.seconds, args.smoke, args.compile_mode, steps, names,
                   args.launcher_rounds)  # fmt: skip


class Results:
    """``name`` in ``out`` (serving.json), rewritten after every step and every recorded row;
    a failing step keeps its traceback."""

    def __init__(self, out: Path, env: dict, name: str = "serving.json") -> None:
        self.path = out / name
        self.data: dict = {"env": env}
        self.started = time.perf_counter()

    def step(self, name: str, fn: Callable[[], object]) -> object:
        print(f"== {name} ({time.perf_counter() - self.started:.0f} s)", flush=True)
        try:
            value = fn()
            self.data[name] = value
        except Exception:
            value = None
            self.data.setdefault("errors", {})[name] = traceback.format_exc()
            print(self.data["errors"][name], flush=True)
        self._write()
        return value

    def record(self, step: str, key: str, value: object) -> None:
        """One row of ``step`` as it is measured, printed and written at once: a run stopped
        midway (a device call's deadline) keeps it. The step's own value replaces them."""
        print(key, value, flush=True)
        self.data.setdefault(step, {})[key] = value
        self._write()

    def _write(self) -> None:
        self.data["elapsed_s"] = round(time.perf_counter() - self.started)
        self.path.write_text(json.dumps(self.data, indent=2) + "\n")


def traced(module, settings: Settings, channels_last: bool, frozen: bool = False):
    """TorchScript of the module (channels_last weights survive tracing and saving);
    ``frozen``: torch.jit.freeze folds batch norms into the convolutions."""
    import numpy as np
    import torch

    if channels_last:
        module = module.to(memory_format=torch.channels_last)
    arrays = example(RESNET, 2, np.random.default_rng(0))
    ex = tuple(torch.from_numpy(a).to(settings.device) for a in arrays.values())
    with torch.no_grad():
        script = torch.jit.trace(module, ex, check_trace=False)
    return torch.jit.freeze(script.eval()) if frozen else script


def engines(modules: dict, settings: Settings, batches: tuple[int, ...]) -> dict:
    import torch

    rows = {}
    with torch.jit.optimized_execution(False):  # as the native backend runs it
        for label, module in modules.items():
            rows[label] = in_process(module, RESNET, batches, settings)
    return rows


def write_variant(repo: Path, variant: Variant, model_pt: Path, settings: Settings) -> None:
    from triton_kit.build_engines.engines.torchscript import (
        TorchConfigOptions,
        torch_model_config,
        torch_model_files,
    )
    from triton_kit.build_engines.repository import (
        Tensor,
        enable_dynamic_batching,
        python_shim,
        write_model,
    )

    options = TorchConfigOptions(
        max_batch_size=256,
        gpu=settings.gpu,
        instances=variant.instances,
        precision="fp16" if settings.half else "fp32",
        graph_batch_sizes=BUCKETS if variant.cuda_graphs and settings.gpu else (),
        graph_dims={n: d for n, (_, d) in RESNET.inputs.items()},
    )
    inputs = [Tensor(n, t, d) for n, (t, d) in RESNET.inputs.items()]
    outputs = [Tensor("logits", "FP32", (1000,))]
    config = torch_model_config(variant.name, inputs, outputs, options)
    enable_dynamic_batching(config, variant.queue_delay_us, variant.preferred)
    files = torch_model_files(model_pt, options)
    if variant.compiled:
        del config.optimization.cuda.graph_spec[:]
        for batch in COMPILED_BUCKETS:  # one compile each: fewer buckets, shorter start
            spec = config.optimization.cuda.graph_spec.add(batch_size=batch)
            spec.input["image"].dim.extend(RESNET.inputs["image"][1])
        config.parameters["torch_compile_mode"].string_value = "default"
        files = {"model.pt2": model_pt, "model.py": python_shim(COMPILED_MODEL)}
    write_model(repo, config, files)


COMPILED_MODEL = "triton_kit.python_models.common.compiled.CompiledModel"
COMPILED_BUCKETS = (1, 16, 64, 128, 256)


def export(module, settings: Settings) -> Path:
    """torch.export of the channels_last module with a dynamic batch (CompiledModel's input)."""
    import torch

    module = module.to(memory_format=torch.channels_last)
    x = torch.randint(0, 256, (4, 224, 224, 3), dtype=torch.uint8, device=settings.device)
    batch = torch.export.Dim("batch", min=1, max=256)
    with torch.no_grad():
        program = torch.export.export(module, (x,), dynamic_shapes=({0: batch},))
    path = Path(tempfile.mkdtemp(prefix="exported-")) / "model.pt2"
    torch.export.save(program, str(path))
    return path


def served(repo: Path, names: list[str], options: Options) -> dict:
    """Every variant at c256, then batch 1 at c1 for the best native and the graphs."""
    from triton_kit.server.launcher import ServerConfig, TritonServer

    config = ServerConfig(
        model_repository=repo, http_port=0, grpc_port=0, metrics_port=0,
        log_file=options.out / "serving-tritonserver.log",
        startup_timeout_s=480.0,  # the compiled model compiles one graph per bucket
    )  # fmt: skip
    rows: dict = {}
    partial = options.out / "serving-served-partial.json"  # a run cut short keeps its rows
    with TritonServer(config) as server:
        url = server.grpc_url.removeprefix("grpc://")
        for name in names:
            rows[f"{name}_c{options.concurrency}"] = measure(
                url, name, options.concurrency, options.seconds, options.out
            )
            print(name, json.dumps(rows[f"{name}_c{options.concurrency}"]), flush=True)
            partial.write_text(json.dumps(rows, indent=2) + "\n")
        for name in names:
            if name in ("native_i1_d2000p", "native_clf_i2_d2000p", "graphs_clf_i2_d2000p",
                        "compiled_i2_d2000p"):  # fmt: skip
                rows[f"{name}_c1"] = measure(url, name, 1, options.seconds, options.out)
    return rows


def compiled(module, settings: Settings, mode: str, batches: tuple[int, ...]) -> dict:
    """torch.compile (channels_last, static shapes per batch) timed eager and under a graph."""
    import torch

    module = module.to(memory_format=torch.channels_last)
    start = time.perf_counter()
    fn = torch.compile(module, mode=mode, dynamic=False)
    rows = in_process(fn, RESNET, batches, settings)
    rows["compile_and_time_s"] = round(time.perf_counter() - start, 1)
    rows["mode"] = mode
    return rows


AOTI_PROBE = r"""
import faulthandler, sys, time, torch
faulthandler.enable()
sys.path.insert(0, sys.argv[3])
from triton_kit.benchmarks.gpu.models import resnet50_uint8
from triton_kit.benchmarks.gpu.settings import Settings
from pathlib import Path
stage = sys.argv[1]; path = sys.argv[2]
s = Settings(out=Path("."), device="cuda")
if stage == "build":
    m = resnet50_uint8(s).cuda().eval().to(memory_format=torch.channels_last)
    x = torch.randint(0, 256, (8, 224, 224, 3), dtype=torch.uint8, device="cuda")
    t = time.time()
    with torch.no_grad():
        ep = torch.export.export(m, (x,))
        p = torch._inductor.aoti_compile_and_package(ep, package_path=path)
    print("built", p, round(time.time() - t, 1), "s", flush=True)
torch.cuda.init()
print("loading after cuda init", flush=True)
runner = torch._inductor.aoti_load_package(path)
print("loaded", type(runner).__name__, flush=True)
x = torch.randint(0, 256, (8, 224, 224, 3), dtype=torch.uint8, device="cuda")
y = runner(x)
torch.cuda.synchronize()
print("ran", tuple(y.shape), flush=True)
"""


def aoti(out: Path) -> dict:
    """Build then load (same process), and load alone (fresh process), under faulthandler."""
    package = Path(tempfile.mkdtemp(prefix="aoti-")) / "resnet50.pt2"
    root = str(Path(__file__).resolve().parents[3])
    rows = {}
    for stage in ("build", "load"):
        try:
            done = subprocess.run(
                [sys.executable, "-X", "faulthandler", "-c", AOTI_PROBE, stage, str(package), root],
                capture_output=True, text=True, timeout=240,
            )  # fmt: skip
            rows[stage] = {"rc": done.returncode, "stdout": done.stdout[-3000:],
                           "stderr": done.stderr[-6000:]}  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            rows[stage] = {"rc": "timeout", "stdout": str(exc.stdout)[-3000:]}
    (out / "aoti-probe.log").write_text(json.dumps(rows, indent=2))
    return rows


def run(options: Options) -> dict:
    import torch

    from triton_kit.benchmarks.gpu.run import environment

    settings = options.settings
    results = Results(options.out, environment(settings))
    batches = (1, 2) if options.smoke else (1, 64, 256)
    module = resnet50_uint8(settings).to(settings.device).eval()
    scripts = {"torchscript": traced(module, settings, False),
               "torchscript_cl": traced(module, settings, True),
               "torchscript_cl_frozen": traced(module, settings, True, frozen=True)}  # fmt: skip
    if "engines" in options.steps:
        results.step("engines", lambda: engines(scripts, settings, batches))
    if "compiled" in options.steps and settings.gpu:  # before serving: the GPU is ours alone
        results.step("compiled", lambda: compiled(module, settings, "default", batches))
    repo = Path(tempfile.mkdtemp(prefix="serving-repo-"))
    paths = {}
    for label, script in scripts.items():
        paths[label] = Path(tempfile.mkdtemp(prefix=f"{label}-")) / "model.pt"
        script.save(str(paths[label]))
    scripts.clear()
    gc.collect()
    if settings.gpu:
        torch.cuda.empty_cache()
    grid = tuple(
        v for v in variants(options.smoke) if v.name in options.variants or not options.variants
    )
    if settings.gpu and any(v.compiled for v in grid):
        paths["exported_cl"] = export(module, settings)
    for v in grid:
        write_variant(repo, v, paths[v.engine], settings)
    if "launcher" in options.steps:
        results.step("launcher", lambda: launcher_row(repo, grid, options))
    if "served" in options.steps:
        results.step("served", lambda: served(repo, [v.name for v in grid], options))
    if "compiled" in options.steps and settings.gpu:
        results.step(
            "compiled_autotune", lambda: compiled(module, settings, options.compile_mode, (256,))
        )
    gc.collect()
    if "aoti" in options.steps and settings.gpu:
        torch.cuda.empty_cache()
        results.step("aoti", lambda: aoti(options.out))
    return results.data


def launcher_row(repo: Path, grid: tuple[Variant, ...], options: Options) -> dict:
    """One model alone in its repository (the launcher's --load-model=* loads every model)."""
    import shutil

    from triton_kit.benchmarks import launcher

    chosen = next((v for v in grid if v.name == "native_i4_d2000p"), grid[-1])
    alone = Path(tempfile.mkdtemp(prefix="launcher-row-"))
    shutil.copytree(repo / chosen.name, alone / chosen.name)
    measured = (options.concurrency, options.seconds, options.launcher_rounds)
    return launcher.compare(launcher.Options(options.out, alone, chosen.name, *measured))


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    data = run(options)
    print(json.dumps(summary(data), indent=1), flush=True)
    return 0


def summary(data: dict) -> dict:
    """The figures that go in the report's table, for the reply's tail."""
    brief: dict = {}
    for label, rows in (data.get("engines") or {}).items():
        for key, row in rows.items():
            brief[f"{label}_{key}"] = round(row["items_per_s"])
    for step in ("compiled", "compiled_autotune"):
        for key, row in (data.get(step) or {}).items():
            if isinstance(row, dict):
                brief[f"{step}_{key}"] = round(row["items_per_s"])
    launcher_data = data.get("launcher") or {}
    brief["launcher"] = (
        launcher_data.get("median_items_per_s"),
        launcher_data.get("launcher_over_bare"),
    )
    for key, row in (data.get("served") or {}).items():
        brief[key] = (round(row["items_per_s"]), round(row["p50"], 2)) if "p50" in row else row
    brief["errors"] = list(data.get("errors") or {})
    return brief


if __name__ == "__main__":
    sys.exit(main())
