"""The precision step of the hook: FP32 ONNX -> FP16/INT8 ONNX, checked against FP32.

Writes the lowered graph and its accuracy report under ``<work-dir>/precision/<model>``;
INT8 ranges are cached per model, calibration data, method and size.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.steps import info

# Yields ONNX Runtime feeds ({input name: array}) of representative data, for INT8 calibration.
CalibrationSource = Callable[[], Iterable[Mapping[str, np.ndarray]]]

CHECK_SAMPLES = 8  # held-out samples (after the calibration ones) for the build-time check


@dataclass(frozen=True)
class Lowered:
    """The ONNX to serve, and the accuracy report comparing it with FP32 (None for fp32)."""

    path: Path
    report_path: Path | None = None


def precision_dir(options: BuildOptions, name: str) -> Path:
    return options.work_dir / "precision" / name


def lowered_path(options: BuildOptions, name: str, onnx_path: Path) -> Path:
    if options.precision == "fp32":
        return onnx_path
    return precision_dir(options, name) / f"model.{options.precision}.onnx"


def calibration_cache(
    options: BuildOptions, name: str, onnx_path: Path, calibration: CalibrationSource | None
) -> Path:
    """Where this model's ranges for this data, method and size are (or will be) cached."""
    from triton_kit.build_engines.engines.onnx_export import sha256
    from triton_kit.build_engines.precision.int8 import cache_path_for, fingerprint

    settings = options.calibration
    digest = fingerprint(calibration(), settings.size) if calibration is not None else ""
    cache_dir = options.work_dir / "calibration" / name
    return cache_path_for(cache_dir, sha256(onnx_path), settings, digest)


def keep_float(options: BuildOptions, name: str) -> tuple[str, ...]:
    """Node-name regexes left unquantised: the family's known-sensitive nodes plus
    ``--int8-keep-float`` (``--int8-keep-float none`` drops the family's defaults)."""
    from triton_kit.build_engines.precision import KEEP_FLOAT

    given = options.int8_keep_float
    defaults = () if "none" in given else KEEP_FLOAT.get(options.family_of(name), ())
    return (*defaults, *(p for p in given if p != "none"))


def lower_precision(
    name: str, onnx_path: Path, options: BuildOptions, calibration: CalibrationSource | None
) -> Lowered:
    """Write the fp16/int8 ONNX under the work dir and its accuracy report beside it."""
    precision = options.precision
    if precision == "fp32":
        return Lowered(onnx_path)
    from triton_kit.build_engines.precision import to_fp16, to_int8
    from triton_kit.build_engines.precision.report import write_report

    target = lowered_path(options, name, onnx_path)
    start = time.perf_counter()
    settings = options.calibration
    if precision == "fp16":
        to_fp16(onnx_path, target)
        info(f"{name}: FP16 graph (FP32 I/O, norms/softmax/reductions FP32) -> {target}")
    elif precision == "int8-dynamic":
        from triton_kit.build_engines.precision.int8_dynamic import to_int8_dynamic

        to_int8_dynamic(onnx_path, target)
        info(f"{name}: INT8 weights, run-time activation scales (no calibration) -> {target}")
    else:
        cache = calibration_cache(options, name, onnx_path, calibration)
        keep = keep_float(options, name)
        result = to_int8(onnx_path, target, calibration, settings, cache, keep)
        how = "cached ranges" if result.cache_hit else f"{result.samples} samples"
        info(f"{name}: INT8 Q/DQ ({settings.method} calibration, {how}; cache {cache}) -> {target}")
        if result.kept_float:
            info(f"{name}: {len(result.kept_float)} nodes kept float (patterns {list(keep)})")
    info(f"{name}: lowered to {precision} in {time.perf_counter() - start:.1f} s")
    skip = 0 if precision == "int8-dynamic" else settings.size  # saw no samples
    report = check_accuracy(onnx_path, target, calibration, skip, options.threads or 0)
    report_path = target.with_suffix(".accuracy.json")
    write_report({"model": name, "precision": precision, **report}, report_path)
    return Lowered(target, report_path)


def check_accuracy(
    fp32_path: Path,
    candidate: Path,
    calibration: CalibrationSource | None,
    skip: int,
    threads: int,
) -> dict[str, object]:
    """FP32 vs candidate on samples the calibration did not see (where the source has them)."""
    from triton_kit.build_engines.precision.report import accuracy_report

    if calibration is None:
        return {"skipped": "the family gave no sample source"}
    feeds, held_out = held_out_feeds(calibration, skip, CHECK_SAMPLES)
    report = accuracy_report(fp32_path, candidate, feeds, threads)
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
