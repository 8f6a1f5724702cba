"""The last step of every family's build: turn a verified FP32 ONNX into what Triton serves.

Every family calls :func:`serving_artifacts` once per ONNX model with the typed
:class:`~build_engines.options.BuildOptions`, so precision and engine are handled in one
place for all of them:

1. lower precision on the graph (:mod:`triton_kit.build_engines.precision.step`), check it
   against FP32 on held-out samples and keep the report beside the artefact;
2. hand the lowered ONNX to the chosen engine's step
(:class:`~build_engines.engines.registry.Engine`).

With ``dry_run`` the plan of work is printed (:mod:`triton_kit.build_engines.dry_run`) and
nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from triton_kit.build_engines.dry_run import describe
from triton_kit.build_engines.engines.registry import ENGINE_NAMES, Engine
from triton_kit.build_engines.engines.step import DynamicAxes, EngineStep, step_of
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.precision.step import CalibrationSource, lower_precision
from triton_kit.build_engines.repository import ModelConfig
from triton_kit.build_engines.steps import StepSkipped

__all__ = [
    "ENGINE_NAMES",
    "CalibrationSource",
    "DryRun",
    "Engine",
    "EngineStep",
    "serving_artifacts",
]


class DryRun(StepSkipped):
    """Raised after a dry run printed its plan: the family's write step ends SKIPPED."""


def serving_artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    options: BuildOptions,
    calibration: CalibrationSource | None = None,
    torch_source: tuple[object, dict[str, np.ndarray]] | None = None,
    dynamic_axes: DynamicAxes | None = None,
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    """Return the model's config and version-folder files for the options' precision/engine.

    ``dynamic_axes`` (input -> {axis: name}, as given to the ONNX export) lets a dry run
    name the axes of an ONNX it has not exported."""
    step = step_of(options.engine)
    step.validate(options)
    if options.dry_run:
        print(describe(name, onnx_path, config, options, calibration, dynamic_axes), flush=True)
        raise DryRun(f"dry run: nothing built or written for {name}")
    step.check_available()  # fail now, not after minutes of calibration
    if step.FROM_SOURCE:  # scripts the PyTorch source, not the ONNX
        return step.artifacts(name, onnx_path, config, options, source=torch_source)
    lowered = lower_precision(name, onnx_path, options, calibration)
    config.parameters["precision"].string_value = options.precision
    extra: dict[str, Path | bytes | str] = {}
    if lowered.report_path is not None:
        extra["accuracy.json"] = lowered.report_path
    served_config, files = step.artifacts(name, lowered.path, config, options)
    return served_config, {**files, **extra}
