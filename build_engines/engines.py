"""The last step of every family's build: turn a verified FP32 ONNX into what Triton serves.

Every family calls :func:`serving_artifacts` once per ONNX model, so precision
(fp16, int8 on the ONNX graph) and engine (onnxruntime, or a TensorRT plan) are
handled in one place for all of them:

1. lower precision on the graph (``build_engines.precision``), check it against FP32 on
   held-out samples and keep the report beside the artefact;
2. serve the ONNX with onnxruntime, or compile it to a strongly typed TensorRT plan
   (``build_engines.tensorrt``) with a sidecar and a trtexec reproduce script.

``--dry-run`` prints that plan of work (and the trtexec command) and writes nothing.
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from build_engines.repository import ModelConfig, render
from build_engines.steps import StepSkipped, info

# Yields ONNX Runtime feeds ({input name: array}) of representative data, for INT8 calibration.
CalibrationSource = Callable[[], Iterable[Mapping[str, np.ndarray]]]

CHECK_SAMPLES = 8  # held-out samples (after the calibration ones) for the build-time check
PLAN = "model.plan"


class DryRun(StepSkipped):
    """Raised after a dry run printed its plan: the family's write step ends SKIPPED."""


@dataclass(frozen=True)
class Lowered:
    """The ONNX to serve, and the accuracy report comparing it with FP32 (None for fp32)."""

    path: Path
    report_path: Path | None = None


def serving_artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    args: argparse.Namespace,
    calibration: CalibrationSource | None = None,
    torch_source: tuple[object, dict[str, np.ndarray]] | None = None,
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    """Return the model's config and version-folder files for ``args.precision``/``args.engine``."""
    precision, engine = _precision(args), _engine(args)
    # --- torch engine hook (issue 10; re-wire into the engine dispatch) ---
    if engine == "torch":
        from build_engines.torch_engine.artifacts import torch_artifacts

        if torch_source is None:
            raise ValueError(f"{name}: --engine torch is not wired for this model yet")
        module, feeds = torch_source
        work = Path(getattr(args, "work_dir", "build"))
        return torch_artifacts(name, module, feeds, onnx_path, config, precision, work)
    # --- end torch engine hook ---
    if getattr(args, "dry_run", False):
        print(describe(name, onnx_path, config, args, calibration), flush=True)
        raise DryRun(f"dry run: nothing built or written for {name}")
    if engine == "tensorrt":
        from build_engines.tensorrt.lazy import import_tensorrt

        import_tensorrt()  # fail now, not after minutes of calibration
    lowered = lower_precision(name, onnx_path, precision, args, calibration)
    config.parameters["precision"].string_value = precision
    extra: dict[str, Path | bytes | str] = {}
    if lowered.report_path is not None:
        extra["accuracy.json"] = lowered.report_path
    if engine == "onnxruntime":
        return config, {"model.onnx": lowered.path, **extra}
    plan_config, plan_files = tensorrt_artifacts(name, lowered.path, config, args, precision)
    return plan_config, {**plan_files, **extra}


# -- command line ------------------------------------------------------------------------


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """Family-independent precision and TensorRT options (``cli.add_common_arguments`` calls it)."""
    add_precision_arguments(parser)
    add_tensorrt_arguments(parser)


def add_precision_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("precision (fp16/int8 on the ONNX graph)")
    group.add_argument(
        "--calibration-method",
        choices=["minmax", "entropy", "percentile"],
        default="minmax",
        help="INT8 calibration method (default: minmax)",
    )
    group.add_argument(
        "--calibration-size",
        type=int,
        default=32,
        help="INT8 calibration samples; ranges are cached per model/method/size (default: 32)",
    )
    group.add_argument(
        "--int8-keep-float",
        action="append",
        metavar="REGEX",
        help="keep nodes whose ONNX name matches in float (repeatable; 'none' drops the "
        "family's defaults, e.g. BERT's feed-forward MatMuls)",
    )
    group.add_argument(
        "--calibration-percentile",
        type=float,
        default=99.999,
        help="percentile for --calibration-method percentile (default: 99.999)",
    )


def add_tensorrt_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("TensorRT (--engine tensorrt)")
    group.add_argument("--workspace-gb", type=float, default=4.0, help="builder workspace (GiB)")
    group.add_argument(
        "--builder-optimization-level",
        type=int,
        choices=range(6),
        default=3,
        metavar="0-5",
        help="builder optimisation level (default: 3)",
    )
    group.add_argument(
        "--sparsity", action="store_true", help="allow 2:4 structured-sparse kernels"
    )
    group.add_argument(
        "--version-compatible",
        action="store_true",
        help="plan loads on this and later TensorRT versions (slower start-up)",
    )
    group.add_argument(
        "--hardware-compatibility-level",
        choices=["none", "ampere+", "same-compute-capability"],
        default="none",
        help="GPUs other than the building one that may run the plan (default: none)",
    )
    group.add_argument(
        "--dla-core", type=int, default=None, help="build for this DLA core, GPU fallback (Jetson)"
    )
    group.add_argument(
        "--timing-cache",
        type=Path,
        default=None,
        help="persistent timing cache (default: <work-dir>/tensorrt/timing.cache)",
    )
    group.add_argument(
        "--profiling-verbosity",
        choices=["layer_names_only", "detailed", "none"],
        default="layer_names_only",
        help="layer detail kept in the plan for profilers and the engine inspector",
    )
    group.add_argument(
        "--shape-range",
        action="append",
        metavar="AXIS=MIN:OPT:MAX[,...]",
        help="range of a dynamic ONNX axis (repeatable; several ranges = several profiles)",
    )
    group.add_argument(
        "--cuda-graphs", action="store_true", help="config: optimization { cuda { graphs: true } }"
    )
    group.add_argument(
        "--gather-kernel-buffer-threshold",
        type=int,
        default=0,
        help="config: gather small input buffers in one kernel above this count (0: off)",
    )
    group.add_argument(
        "--warmup", action="store_true", help="config: a zero-data warm-up request per instance"
    )


# -- precision ---------------------------------------------------------------------------


def precision_dir(args: argparse.Namespace, name: str) -> Path:
    return Path(getattr(args, "work_dir", "build")) / "precision" / name


def calibration_settings(args: argparse.Namespace):
    from build_engines.precision import CalibrationSettings

    return CalibrationSettings(
        method=getattr(args, "calibration_method", "minmax"),
        size=getattr(args, "calibration_size", 32),
        percentile=getattr(args, "calibration_percentile", 99.999),
    )


def calibration_cache(
    args: argparse.Namespace, name: str, onnx_path: Path, calibration: CalibrationSource | None
) -> Path:
    """Where this model's ranges for this data, method and size are (or will be) cached."""
    from build_engines.onnx_export import sha256
    from build_engines.precision.int8 import cache_path_for, fingerprint

    settings = calibration_settings(args)
    digest = fingerprint(calibration(), settings.size) if calibration is not None else ""
    cache_dir = Path(getattr(args, "work_dir", "build")) / "calibration" / name
    return cache_path_for(cache_dir, sha256(onnx_path), settings, digest)


def keep_float(args: argparse.Namespace, name: str) -> tuple[str, ...]:
    """Node-name regexes left unquantised: the family's known-sensitive nodes plus
    ``--int8-keep-float`` (``--int8-keep-float none`` drops the family's defaults)."""
    from build_engines.precision import KEEP_FLOAT

    given = list(getattr(args, "int8_keep_float", None) or [])
    defaults = () if "none" in given else KEEP_FLOAT.get(_family(args, name), ())
    return (*defaults, *(p for p in given if p != "none"))


def lowered_path(args: argparse.Namespace, name: str, onnx_path: Path, precision: str) -> Path:
    if precision == "fp32":
        return onnx_path
    return precision_dir(args, name) / f"model.{precision}.onnx"


def lower_precision(
    name: str,
    onnx_path: Path,
    precision: str,
    args: argparse.Namespace,
    calibration: CalibrationSource | None,
) -> Lowered:
    """Write the fp16/int8 ONNX under the work dir and its accuracy report beside it."""
    if precision == "fp32":
        return Lowered(onnx_path)
    from build_engines.precision import to_fp16, to_int8

    target = lowered_path(args, name, onnx_path, precision)
    start = time.perf_counter()
    settings = calibration_settings(args)
    if precision == "fp16":
        to_fp16(onnx_path, target)
        info(f"{name}: FP16 graph (FP32 I/O, norms/softmax/reductions FP32) -> {target}")
    else:
        cache = calibration_cache(args, name, onnx_path, calibration)
        keep = keep_float(args, name)
        result = to_int8(onnx_path, target, calibration, settings, cache, keep)
        how = "cached ranges" if result.cache_hit else f"{result.samples} samples"
        info(f"{name}: INT8 Q/DQ ({settings.method} calibration, {how}; cache {cache}) -> {target}")
        if result.kept_float:
            info(f"{name}: {len(result.kept_float)} nodes kept float (patterns {list(keep)})")
    info(f"{name}: lowered to {precision} in {time.perf_counter() - start:.1f} s")
    report = check_accuracy(onnx_path, target, calibration, settings.size, args)
    report_path = target.with_suffix(".accuracy.json")
    from build_engines.precision.report import write_report

    write_report({"model": name, "precision": precision, **report}, report_path)
    return Lowered(target, report_path)


def check_accuracy(
    fp32_path: Path,
    candidate: Path,
    calibration: CalibrationSource | None,
    skip: int,
    args: argparse.Namespace,
) -> dict[str, object]:
    """FP32 vs candidate on samples the calibration did not see (where the source has them)."""
    from build_engines.precision.report import accuracy_report

    if calibration is None:
        return {"skipped": "the family gave no sample source"}
    feeds, held_out = held_out_feeds(calibration, skip, CHECK_SAMPLES)
    report = accuracy_report(fp32_path, candidate, feeds, getattr(args, "threads", 0))
    report["held_out"] = held_out
    for output, metrics in report["outputs"].items():  # type: ignore[union-attr]
        summary = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        where = "held-out" if held_out else "calibration"
        info(f"  vs fp32 on {len(feeds)} {where} samples, {output}: {summary}")
    return report


def held_out_feeds(
    calibration: CalibrationSource, skip: int, count: int
) -> tuple[list[Mapping[str, np.ndarray]], bool]:
    """``count`` feeds after the first ``skip``; the first ones if the source is shorter."""
    feeds = list(itertools.islice(calibration(), skip, skip + count))
    if feeds:
        return feeds, True
    return list(itertools.islice(calibration(), count)), False


# -- TensorRT ----------------------------------------------------------------------------


def tensorrt_profiles(name: str, onnx_path: Path, config: ModelConfig, args: argparse.Namespace):
    """Profiles from the ONNX inputs (or the config's, before export) and the shape ranges."""
    from build_engines.tensorrt.profiles import (
        config_inputs,
        derive_profiles,
        onnx_inputs,
        parse_shape_ranges,
        ranges_for,
    )

    inputs = onnx_inputs(onnx_path) if Path(onnx_path).exists() else config_inputs(config)
    overrides = parse_shape_ranges(getattr(args, "shape_range", None) or [])
    ranges = ranges_for(_family(args, name), config, overrides)
    return derive_profiles(inputs, config.max_batch_size, ranges)


def tensorrt_artifacts(
    name: str, onnx_path: Path, config: ModelConfig, args: argparse.Namespace, precision: str
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    """Build the plan; return its config and model.plan, sidecar and reproduce script."""
    from build_engines.onnx_export import sha256
    from build_engines.tensorrt.builder import build_plan
    from build_engines.tensorrt.config import tensorrt_plan_config
    from build_engines.tensorrt.device import visible_gpus
    from build_engines.tensorrt.options import TensorRTOptions
    from build_engines.tensorrt.sidecar import SIDECAR_NAME, Sidecar

    options = TensorRTOptions.from_args(args)
    profiles = tensorrt_profiles(name, onnx_path, config, args)
    built = build_plan(onnx_path, profiles, options)
    gpus = visible_gpus()
    gpu = gpus[0] if gpus else None
    sidecar = Sidecar(
        model=name,
        family=_family(args, name),
        tensorrt_version=built.tensorrt_version,
        gpu_name=gpu.name if gpu else "unknown",
        compute_capability=gpu.compute_capability if gpu else "unknown",
        precision=precision,
        onnx_sha256=sha256(onnx_path),
        profiles=[p.as_record() for p in profiles],
        build_options=options.as_record(),
        rebuild_command=rebuild_command(args, name),
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    plan_config = tensorrt_plan_config(config, profiles, options, getattr(args, "instances", 1))
    info(f"{name}: TensorRT {built.tensorrt_version} plan, {len(built.plan) / 2**20:.1f} MiB")
    return plan_config, {
        PLAN: built.plan,
        SIDECAR_NAME: sidecar.to_json(),
        "reproduce.sh": _reproduce(name, onnx_path, profiles, options, args),
    }


def _reproduce(name, onnx_path, profiles, options, args) -> str:
    from build_engines.tensorrt.trtexec import reproduce_script, trtexec_command

    plan_path = Path(getattr(args, "output_repository", "model_repository")) / name / "1" / PLAN
    command = trtexec_command(onnx_path, plan_path, profiles, options)
    header = f"{name}: the plan beside this file, rebuilt with trtexec"
    return reproduce_script(command, rebuild_command(args, name), header)


# Option values that need not be repeated in a rebuild command.
_DEFAULTS: dict[str, object] = {
    "workspace_gb": 4.0,
    "builder_optimization_level": 3,
    "hardware_compatibility_level": "none",
    "dla_core": None,
    "profiling_verbosity": "layer_names_only",
    "gather_kernel_buffer_threshold": 0,
    "calibration_method": "minmax",
    "calibration_size": 32,
    "calibration_percentile": 99.999,
}


def rebuild_command(args: argparse.Namespace, name: str) -> str:
    """The ``python -m build_engines`` line that rebuilds this plan (for sidecars and errors)."""
    parts = ["python", "-m", "build_engines", _family(args, name), "--engine", "tensorrt"]
    parts += ["--precision", _precision(args)]
    for flag, default in _DEFAULTS.items():
        value = getattr(args, flag, default)
        if value != default and (_precision(args) == "int8" or not flag.startswith("calib")):
            parts += [f"--{flag.replace('_', '-')}", str(value)]
    for flag in ("sparsity", "version_compatible", "cuda_graphs", "warmup"):
        if getattr(args, flag, False):
            parts.append(f"--{flag.replace('_', '-')}")
    for item in getattr(args, "shape_range", None) or []:
        parts += ["--shape-range", item]
    if getattr(args, "output_repository", None) not in (None, Path("model_repository")):
        parts += ["--output-repository", str(args.output_repository)]
    return shlex.join(parts)


# -- dry run -----------------------------------------------------------------------------


def describe(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    args: argparse.Namespace,
    calibration: CalibrationSource | None = None,
) -> str:
    """The plan of work for one model, and for TensorRT the config and trtexec command."""
    precision, engine = _precision(args), _engine(args)
    served = lowered_path(args, name, onnx_path, precision)
    lines = [f"=== plan of work for {name}: --precision {precision} --engine {engine} ==="]
    lines += _describe_precision(name, onnx_path, served, precision, args, calibration)
    repo = Path(getattr(args, "output_repository", "model_repository")) / name
    if engine == "onnxruntime":
        lines.append(f"write {repo}/config.pbtxt (onnxruntime_onnx) and {repo}/1/model.onnx")
        return "\n".join(lines)
    lines += _describe_tensorrt(name, onnx_path, served, config, args, repo)
    return "\n".join(lines)


def _describe_precision(name, onnx_path, served, precision, args, calibration) -> list[str]:
    if precision == "fp32":
        return [f"precision: serve {onnx_path} as exported (FP32)"]
    if precision == "fp16":
        return [
            f"precision: FP16 with onnxruntime.transformers.float16 (FP32 I/O; LayerNorm, Softmax, "
            f"reductions kept FP32): {onnx_path} -> {served}",
            f"check: FP16 vs FP32 on {CHECK_SAMPLES} held-out samples -> "
            f"{served.with_suffix('.accuracy.json')}",
        ]
    settings = calibration_settings(args)
    source = "the family's calibration source" if calibration else "NO calibration source"
    cached = Path(onnx_path).exists() and calibration_cache(args, name, onnx_path, calibration)
    cache = "(cache exists: calibration skipped)" if cached and cached.exists() else ""
    return [
        f"precision: INT8 Q/DQ with onnxruntime quantize_static (QDQ, per-channel symmetric "
        f"weights, symmetric activations, zero point 0) on Conv/MatMul/Gemm inputs: "
        f"{onnx_path} -> {served}",
        f"calibration: {settings.method} on {settings.size} samples from {source} {cache}".rstrip(),
        f"kept float (no Q/DQ): nodes matching {list(keep_float(args, name)) or 'none'}",
        f"check: INT8 vs FP32 on {CHECK_SAMPLES} held-out samples -> "
        f"{served.with_suffix('.accuracy.json')}",
    ]


def _describe_tensorrt(name, onnx_path, served, config, args, repo) -> list[str]:
    from build_engines.tensorrt.config import tensorrt_plan_config
    from build_engines.tensorrt.lazy import tensorrt_available
    from build_engines.tensorrt.options import TensorRTOptions
    from build_engines.tensorrt.trtexec import render as render_command
    from build_engines.tensorrt.trtexec import trtexec_command

    options = TensorRTOptions.from_args(args)
    profiles = tensorrt_profiles(name, onnx_path, config, args)  # lowering keeps the inputs
    lines = [
        "tensorrt: strongly typed network from the ONNX above (TensorRT "
        + ("found" if tensorrt_available() else "NOT installed here: the real build fails")
        + f"); {len(profiles)} optimisation profile(s):"
    ]
    for index, profile in enumerate(profiles):
        for input_name, shapes in profile.shapes:
            lines.append(
                f"  profile {index} {input_name}: min {_shape(shapes.min)} "
                f"opt {_shape(shapes.opt)} max {_shape(shapes.max)}"
            )
    lines.append(f"options: {options.as_record()}")
    lines.append(
        f"write {repo}/1/{PLAN}, {repo}/1/model.plan.json (sidecar), {repo}/1/reproduce.sh"
    )
    plan_config = tensorrt_plan_config(config, profiles, options, getattr(args, "instances", 1))
    lines.append(f"{repo}/config.pbtxt:")
    lines += ["  " + line for line in render(plan_config).splitlines()]
    plan_path = repo / "1" / PLAN
    lines.append("trtexec equivalent:")
    lines.append("  " + render_command(trtexec_command(served, plan_path, profiles, options)))
    lines.append(f"kit command: {rebuild_command(args, name)}")
    return lines


def _shape(dims: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in dims)


def _precision(args: argparse.Namespace) -> str:
    return getattr(args, "precision", "fp32")


def _engine(args: argparse.Namespace) -> str:
    return getattr(args, "engine", "onnxruntime")


def _family(args: argparse.Namespace, name: str) -> str:
    family = getattr(args, "family", None)
    return family if family and family != "all" else name.split("_")[0]
