"""The TensorRT engine step: a strongly typed plan from the precision-lowered ONNX.

Registered as ``Engine.TENSORRT`` in :mod:`triton_kit.build_engines.engines.registry`; builds with
:mod:`triton_kit.build_engines.engines.tensorrt.builder`, writes the plan, its sidecar and a trtexec
reproduce script, and describes all of it for ``--dry-run``.
"""

from __future__ import annotations

import time
from pathlib import Path

from triton_kit.build_engines.options import BuildOptions, rebuild_command
from triton_kit.build_engines.repository import ModelConfig, render
from triton_kit.build_engines.steps import info

PLAN = "model.plan"
FROM_SOURCE = False  # compiles the ONNX


def validate(options: BuildOptions) -> None:
    if options.tensorrt.dla_core is not None:
        check_dla_precision(options.precision)


def check_available() -> None:
    from triton_kit.build_engines.engines.tensorrt.lazy import import_tensorrt

    import_tensorrt()


def artifacts(name: str, onnx_path: Path, config: ModelConfig, options: BuildOptions):
    return tensorrt_artifacts(name, onnx_path, config, options)


def check_dla_precision(precision: str) -> None:
    """DLA has no FP32 kernels: with GPU fallback an FP32 network would run on the GPU."""
    if precision == "fp32":
        raise ValueError(
            "DLA runs FP16 or INT8 only: pass --precision fp16 or int8 with --dla-core"
        )


def tensorrt_profiles(
    name: str, onnx_path: Path, config: ModelConfig, options: BuildOptions, dynamic_axes=None
):
    """Profiles from the ONNX inputs (or the config's, before export) and the shape ranges."""
    from triton_kit.build_engines.engines.tensorrt.profiles import (
        config_inputs,
        derive_profiles,
        onnx_inputs,
        parse_shape_ranges,
        ranges_for,
        static_profiles,
    )

    exported = Path(onnx_path).exists()
    inputs = onnx_inputs(onnx_path) if exported else config_inputs(config, dynamic_axes)
    overrides = parse_shape_ranges(list(options.shape_ranges))
    ranges = ranges_for(options.family_of(name), config, overrides)
    profiles = derive_profiles(inputs, config.max_batch_size, ranges)
    return profiles if options.tensorrt.dla_core is None else static_profiles(profiles)


def tensorrt_artifacts(
    name: str, onnx_path: Path, config: ModelConfig, options: BuildOptions
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    """Build the plan; return its config and model.plan, sidecar and reproduce script."""
    from triton_kit.build_engines.engines.onnx_export import sha256
    from triton_kit.build_engines.engines.tensorrt.builder import build_plan
    from triton_kit.build_engines.engines.tensorrt.config import tensorrt_plan_config
    from triton_kit.python_models.common.tensorrt_sidecar import SIDECAR_NAME, Sidecar
    from triton_kit.server.tensorrt_device import visible_gpus

    profiles = tensorrt_profiles(name, onnx_path, config, options)
    built = build_plan(onnx_path, profiles, options.tensorrt)
    gpus = visible_gpus()
    gpu = gpus[0] if gpus else None
    sidecar = Sidecar(
        model=name,
        family=options.family_of(name),
        tensorrt_version=built.tensorrt_version,
        gpu_name=gpu.name if gpu else "unknown",
        compute_capability=gpu.compute_capability if gpu else "unknown",
        precision=options.precision,
        onnx_sha256=sha256(onnx_path),
        profiles=[p.as_record() for p in profiles],
        build_options=options.tensorrt.as_record(),
        rebuild_command=rebuild_command(options, name),
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    plan_config = tensorrt_plan_config(config, profiles, options.tensorrt, options.instances or 1)
    info(f"{name}: TensorRT {built.tensorrt_version} plan, {len(built.plan) / 2**20:.1f} MiB")
    return plan_config, {
        PLAN: built.plan,
        SIDECAR_NAME: sidecar.to_json(),
        "reproduce.sh": _reproduce(name, onnx_path, profiles, options),
    }


def _reproduce(name: str, onnx_path: Path, profiles, options: BuildOptions) -> str:
    from triton_kit.build_engines.engines.tensorrt.trtexec import reproduce_script, trtexec_command

    plan_path = options.output_repository / name / "1" / PLAN
    command = trtexec_command(onnx_path, plan_path, profiles, options.tensorrt)
    header = f"{name}: the plan beside this file, rebuilt with trtexec"
    return reproduce_script(command, rebuild_command(options, name), header)


def describe(
    name: str,
    onnx_path: Path,
    served: Path,
    config: ModelConfig,
    options: BuildOptions,
    dynamic_axes=None,
) -> list[str]:
    """Dry run: profiles, options, the tensorrt_plan config and the trtexec command."""
    from triton_kit.build_engines.engines.tensorrt.config import tensorrt_plan_config
    from triton_kit.build_engines.engines.tensorrt.lazy import tensorrt_available
    from triton_kit.build_engines.engines.tensorrt.trtexec import render as render_command
    from triton_kit.build_engines.engines.tensorrt.trtexec import trtexec_command

    repo = options.output_repository / name
    # lowering keeps the inputs
    profiles = tensorrt_profiles(name, onnx_path, config, options, dynamic_axes)
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
    lines.append(f"options: {options.tensorrt.as_record()}")
    lines.append(
        f"write {repo}/1/{PLAN}, {repo}/1/model.plan.json (sidecar), {repo}/1/reproduce.sh"
    )
    plan_config = tensorrt_plan_config(config, profiles, options.tensorrt, options.instances or 1)
    lines.append(f"{repo}/config.pbtxt:")
    lines += ["  " + line for line in render(plan_config).splitlines()]
    plan_path = repo / "1" / PLAN
    lines.append("trtexec equivalent:")
    command = trtexec_command(served, plan_path, profiles, options.tensorrt)
    lines.append("  " + render_command(command))
    lines.append(f"kit command: {rebuild_command(options, name)}")
    return lines


def _shape(dims: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in dims)
