"""The last step of every family's build: turn a verified FP32 ONNX into what Triton serves.

Every family calls :func:`serving_artifacts` once per ONNX model, so precision
(fp16, int8 on the ONNX graph) and engine (onnxruntime, or a TensorRT plan) are
handled in one place for all of them:

1. lower precision on the graph (``build_engines.precision``), check it against FP32 on
   held-out samples and keep the report beside the artefact;
2. hand the lowered ONNX to the chosen engine's step (:class:`Engine`: onnxruntime serves it
   as is; ``build_engines.tensorrt.engine`` compiles a strongly typed plan with a sidecar
   and a trtexec reproduce script).

``--dry-run`` prints that plan of work (and the trtexec command) and writes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import shlex
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Protocol

import numpy as np

from build_engines.precision.int8 import METHODS, CalibrationSettings
from build_engines.repository import ModelConfig
from build_engines.steps import StepSkipped, info
from build_engines.tensorrt.options import TensorRTOptions
from python_models.contracts import family_of

# The defaults, from the option dataclasses (the only place they are written).
_CALIBRATION = CalibrationSettings()
_TENSORRT = TensorRTOptions()

# Yields ONNX Runtime feeds ({input name: array}) of representative data, for INT8 calibration.
CalibrationSource = Callable[[], Iterable[Mapping[str, np.ndarray]]]

CHECK_SAMPLES = 8  # held-out samples (after the calibration ones) for the build-time check
PLAN = "model.plan"


class Engine(Enum):
    """What a served ONNX model becomes: the ONE place engines are registered.

    Each member is ``--engine`` NAME and the module (imported only when chosen) holding its
    step, :class:`EngineStep`. A new engine is one line here plus its module."""

    ONNXRUNTIME = "onnxruntime", "build_engines.onnxruntime_engine"
    TENSORRT = "tensorrt", "build_engines.tensorrt.engine"
    TORCH = "torch", "build_engines.torch_engine.engine"

    def __new__(cls, flag: str, module: str) -> Engine:
        member = object.__new__(cls)
        member._value_ = flag
        member.module = module
        return member

    def step(self) -> EngineStep:
        return importlib.import_module(self.module)  # type: ignore[return-value]


ENGINE_NAMES = [engine.value for engine in Engine]


class EngineStep(Protocol):
    """The functions an engine's module defines."""

    def validate(self, precision: str, args: argparse.Namespace) -> None:
        """Refuse option combinations the engine cannot build (before any work)."""

    def check_available(self) -> None:
        """Fail fast where the engine's library is missing."""

    def artifacts(
        self,
        name: str,
        onnx_path: Path,
        config: ModelConfig,
        args: argparse.Namespace,
        precision: str,
    ) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
        """The served config and version-folder files from the (precision-lowered) ONNX."""

    def describe(
        self, name: str, onnx_path: Path, served: Path, config: ModelConfig, args, repo: Path
    ) -> list[str]:
        """Dry-run lines: what ``artifacts`` would build and write."""


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
    precision, step = _precision(args), _engine(args).step()
    step.validate(precision, args)
    if getattr(args, "dry_run", False):
        print(describe(name, onnx_path, config, args, calibration), flush=True)
        raise DryRun(f"dry run: nothing built or written for {name}")
    step.check_available()  # fail now, not after minutes of calibration
    if getattr(step, "FROM_SOURCE", False):  # scripts the PyTorch source, not the ONNX
        return step.artifacts(name, onnx_path, config, args, precision, source=torch_source)
    lowered = lower_precision(name, onnx_path, precision, args, calibration)
    config.parameters["precision"].string_value = precision
    extra: dict[str, Path | bytes | str] = {}
    if lowered.report_path is not None:
        extra["accuracy.json"] = lowered.report_path
    served_config, files = step.artifacts(name, lowered.path, config, args, precision)
    return served_config, {**files, **extra}


# -- command line ------------------------------------------------------------------------


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """Family-independent precision and TensorRT options (``cli.add_common_arguments`` calls it)."""
    add_precision_arguments(parser)
    add_tensorrt_arguments(parser)


def add_precision_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("precision (fp16/int8 on the ONNX graph)")
    group.add_argument(
        "--calibration-method",
        choices=METHODS,
        default=_CALIBRATION.method,
        help="INT8 calibration method (default: %(default)s)",
    )
    group.add_argument(
        "--calibration-size",
        type=int,
        default=_CALIBRATION.size,
        help="INT8 calibration samples; ranges are cached per model/method/size "
        "(default: %(default)s)",
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
        default=_CALIBRATION.percentile,
        help="percentile for --calibration-method percentile (default: %(default)s)",
    )


def add_tensorrt_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("TensorRT (--engine tensorrt)")
    group.add_argument(
        "--workspace-gb",
        type=float,
        default=_TENSORRT.workspace_gb,
        help="builder workspace (GiB)",
    )
    group.add_argument(
        "--builder-optimization-level",
        type=int,
        choices=range(6),
        default=_TENSORRT.builder_optimization_level,
        metavar="0-5",
        help="builder optimisation level (default: %(default)s)",
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
        default=_TENSORRT.hardware_compatibility_level,
        help="GPUs other than the building one that may run the plan (default: %(default)s; "
        "same-compute-capability needs TensorRT 10.9+)",
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
        default=_TENSORRT.profiling_verbosity,
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
        default=_TENSORRT.gather_kernel_buffer_threshold,
        help="config: gather small input buffers in one kernel above this count (0: off)",
    )
    group.add_argument(
        "--warmup", action="store_true", help="config: a zero-data warm-up request per instance"
    )


# -- precision ---------------------------------------------------------------------------


def precision_dir(args: argparse.Namespace, name: str) -> Path:
    return Path(getattr(args, "work_dir", "build")) / "precision" / name


def calibration_settings(args: argparse.Namespace) -> CalibrationSettings:
    """The calibration flags given in ``args``; absent ones take the dataclass defaults."""
    given = {f: getattr(args, f"calibration_{f}") for f in _calibration_fields(args)}
    return CalibrationSettings(**given)


def _calibration_fields(args: argparse.Namespace) -> list[str]:
    return [f.name for f in fields(CalibrationSettings) if hasattr(args, f"calibration_{f.name}")]


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


def _changed_flags(
    args: argparse.Namespace, prefix: str, defaults: Mapping[str, object], skip: tuple = ()
) -> list[str]:
    """Flags whose value differs from the dataclass default (the only place defaults live)."""
    parts: list[str] = []
    for field_name, default in defaults.items():
        value = getattr(args, prefix + field_name, default)
        if field_name in skip or value == default:
            continue
        flag = "--" + (prefix + field_name).replace("_", "-")
        parts += [flag] if isinstance(default, bool) else [flag, str(value)]
    return parts


def rebuild_command(args: argparse.Namespace, name: str) -> str:
    """The ``python -m build_engines`` line that rebuilds this plan (for sidecars and errors)."""
    parts = ["python", "-m", "build_engines", _family(args, name), "--engine", "tensorrt"]
    parts += ["--precision", _precision(args)]
    changed = _changed_flags(args, "", asdict(_TENSORRT), skip=("timing_cache",))
    if _precision(args) == "int8":
        changed += _changed_flags(args, "calibration_", asdict(_CALIBRATION))
    parts += changed
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
    lines = [f"=== plan of work for {name}: --precision {precision} --engine {engine.value} ==="]
    lines += _describe_precision(name, onnx_path, served, precision, args, calibration)
    repo = Path(getattr(args, "output_repository", "model_repository")) / name
    lines += engine.step().describe(name, onnx_path, served, config, args, repo)
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


def _precision(args: argparse.Namespace) -> str:
    return getattr(args, "precision", "fp32")


def _engine(args: argparse.Namespace) -> Engine:
    return Engine(getattr(args, "engine", Engine.ONNXRUNTIME.value))


def family(args: argparse.Namespace, name: str) -> str:
    return _family(args, name)


def _family(args: argparse.Namespace, name: str) -> str:
    family = getattr(args, "family", None)
    return family if family and family != "all" else family_of(name)
