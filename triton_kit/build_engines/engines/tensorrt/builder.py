"""Build a serialized plan with the TensorRT Python API (EngineFromNetwork(NetworkFromOnnxPath)).

API used, and the TensorRT version it needs (checked against the 10.x and 11.x docs):
  trt.Builder(logger), builder.create_network(flags)                   all
  NetworkDefinitionCreationFlag.STRONGLY_TYPED                          10.0+ (11.x: deprecated
                                                                        and ignored: always strong)
  trt.OnnxParser(network, logger).parse_from_file(path), get_error(i)  8.x+
  builder.create_builder_config()                                       all
  config.set_memory_pool_limit(MemoryPoolType.WORKSPACE, bytes)         8.4+
  config.builder_optimization_level = 0..5                              8.6+
  config.profiling_verbosity = ProfilingVerbosity.*                     8.2+
  config.set_flag(BuilderFlag.SPARSE_WEIGHTS)                           8.0+
  config.set_flag(BuilderFlag.VERSION_COMPATIBLE)                       8.6+
  config.hardware_compatibility_level = HardwareCompatibilityLevel.*    8.6+ (AMPERE_PLUS);
                                                                        SAME_COMPUTE_CAPABILITY 10.x
  config.default_device_type = DeviceType.DLA, config.DLA_core = n,
  config.set_flag(BuilderFlag.GPU_FALLBACK), builder.num_DLA_cores      all (DLA: Jetson/DRIVE)
  config.create_timing_cache(bytes), config.set_timing_cache(cache, ignore_mismatch=False),
  config.get_timing_cache().serialize()                                 8.0+
  builder.create_optimization_profile(), profile.set_shape(name, min, opt, max),
  config.add_optimization_profile(profile)                              all
  builder.build_serialized_network(network, config)                     8.0+
No BuilderFlag.FP16/INT8 and no calibrator: deprecated in 10.12, removed in 11.0; precision is
already in the ONNX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from triton_kit.build_engines.engines.tensorrt.lazy import import_tensorrt, major_version
from triton_kit.build_engines.engines.tensorrt.options import TensorRTOptions
from triton_kit.build_engines.engines.tensorrt.profiles import Profile
from triton_kit.build_engines.steps import info, warn

# TensorRT release that first has each level (HardwareCompatibilityLevel in NvInfer.h, and
# trtexec's "Valid options": 10.5-10.8 accept none/ampere+ only).
HARDWARE_LEVEL_SINCE = {"none": (8, 6), "ampere+": (8, 6), "same-compute-capability": (10, 9)}
_HARDWARE_LEVEL = {
    "none": "NONE",
    "ampere+": "AMPERE_PLUS",
    "same-compute-capability": "SAME_COMPUTE_CAPABILITY",
}


class PlanBuildError(RuntimeError):
    """TensorRT refused the network or the configuration; the message has its errors."""


@dataclass(frozen=True)
class BuiltPlan:
    plan: bytes
    tensorrt_version: str


def build_plan(onnx_path: Path, profiles: Sequence[Profile], options: TensorRTOptions) -> BuiltPlan:
    trt = import_tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network, _parser = network_from_onnx(trt, builder, logger, onnx_path)  # parser owns weights
    config = builder_config(trt, builder, options, network)
    for profile in profiles:
        config.add_optimization_profile(optimization_profile(builder, profile))
    cache = attach_timing_cache(config, options.timing_cache)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise PlanBuildError(f"TensorRT could not build {onnx_path}; see its log above")
    if options.timing_cache is not None and cache is not None:
        options.timing_cache.parent.mkdir(parents=True, exist_ok=True)
        options.timing_cache.write_bytes(bytes(config.get_timing_cache().serialize()))
    from triton_kit.server.tensorrt_device import release

    return BuiltPlan(bytes(serialized), release(str(trt.__version__)) or str(trt.__version__))


def network_from_onnx(trt, builder, logger, onnx_path: Path):
    """A strongly typed network parsed from ONNX (types come from the graph's casts and Q/DQ).

    Returns the parser too: it owns the weights and must outlive the build."""
    flags = 0
    if major_version(trt) < 11:  # 11.x: always strongly typed, the flag is deprecated
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "\n".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise PlanBuildError(f"TensorRT's ONNX parser rejected {onnx_path}:\n{errors}")
    return network, parser


def check_supported(options: TensorRTOptions, version: str) -> None:
    """Refuse options this TensorRT does not have, naming the release that has them."""
    from triton_kit.server.tensorrt_device import release

    have = tuple(int(p) for p in (release(version) or "0.0.0").split(".")[:2])
    need = HARDWARE_LEVEL_SINCE[options.hardware_compatibility_level]
    if have < need:
        raise PlanBuildError(
            f"--hardware-compatibility-level {options.hardware_compatibility_level} needs "
            f"TensorRT {need[0]}.{need[1]} or later; this is TensorRT {release(version)} "
            "(the Triton 24.10 image has 10.5): use 'ampere+' or 'none'"
        )
    if options.dla_core is not None and (11, 0) <= have <= (11, 3):
        raise PlanBuildError(f"TensorRT {release(version)} has no DLA support; drop --dla-core")


def builder_config(trt, builder, options: TensorRTOptions, network=None):
    check_supported(options, str(trt.__version__))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_bytes)
    config.builder_optimization_level = options.builder_optimization_level
    config.profiling_verbosity = getattr(
        trt.ProfilingVerbosity, options.profiling_verbosity.upper()
    )
    if options.sparsity:
        config.set_flag(trt.BuilderFlag.SPARSE_WEIGHTS)
    if options.version_compatible:
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
    if options.hardware_compatibility_level != "none":
        level = _HARDWARE_LEVEL[options.hardware_compatibility_level]
        config.hardware_compatibility_level = getattr(trt.HardwareCompatibilityLevel, level)
    if options.dla_core is not None:
        use_dla(trt, builder, config, options.dla_core, network)
    return config


def use_dla(trt, builder, config, core: int, network=None) -> list:
    """Run layers on a DLA core, falling back to the GPU for layers DLA cannot run.

    Returns (and reports) the layers that fall back: with GPU_FALLBACK they would otherwise
    land on the GPU silently."""
    available = builder.num_DLA_cores
    if available == 0:
        raise PlanBuildError(
            f"--dla-core {core} asked for, but this device has no DLA (DLA exists on Jetson "
            "AGX/NX Xavier and Orin, and DRIVE); drop --dla-core to build for the GPU"
        )
    if not 0 <= core < available:
        raise PlanBuildError(f"--dla-core {core} out of range: this device has {available}")
    config.default_device_type = trt.DeviceType.DLA
    config.DLA_core = core
    config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    if network is None:
        return []
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    fallback = [layer for layer in layers if not config.can_run_on_DLA(layer)]
    info(f"DLA core {core}: {len(fallback)} of {len(layers)} layers fall back to the GPU")
    return fallback


def optimization_profile(builder, profile: Profile):
    trt_profile = builder.create_optimization_profile()
    for name, shapes in profile.shapes:
        trt_profile.set_shape(name, shapes.min, shapes.opt, shapes.max)
    return trt_profile


def attach_timing_cache(config, path: Path | None):
    """Load the persistent timing cache (or start an empty one) so rebuilds skip tactic timing.

    The cache volume outlives hosts: a cache from another GPU or TensorRT version is refused
    by ``set_timing_cache`` (it returns False) or by ``create_timing_cache``; it is then
    replaced by an empty one, which the build fills and saves over the stale file."""
    if path is None:
        return None
    blob = path.read_bytes() if path.is_file() else b""
    try:
        cache = config.create_timing_cache(blob)
    except Exception:
        cache = None
    if cache is not None and config.set_timing_cache(cache, ignore_mismatch=False):
        return cache
    warn(f"timing cache {path} is from another GPU or TensorRT version; starting a new one")
    cache = config.create_timing_cache(b"")
    if not config.set_timing_cache(cache, ignore_mismatch=False):
        raise PlanBuildError("TensorRT refused an empty timing cache")
    return cache
