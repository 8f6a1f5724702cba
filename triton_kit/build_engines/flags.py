"""The command-line flags every build shares, and the one conversion into :class:`BuildOptions`.

Used by ``python -m triton_kit.build_engines`` (:mod:`triton_kit.build_engines.cli`) and
``python -m triton_kit.build_engines.engines.tensorrt``; each default shown here is read from the
option dataclasses.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from triton_kit.build_engines.engines.aoti.options import CXX_ENV, AotiOptions
from triton_kit.build_engines.engines.registry import ENGINE_NAMES
from triton_kit.build_engines.engines.tensorrt.options import (
    HARDWARE_LEVELS,
    PROFILING_VERBOSITY,
    TensorRTOptions,
)
from triton_kit.build_engines.options import (
    PRECISIONS,
    QUEUE_POLICIES,
    BuildOptions,
    queue_policy,
    queue_policy_name,
)
from triton_kit.build_engines.precision.int8 import METHODS, CalibrationSettings

_BUILD = BuildOptions()
_CALIBRATION = CalibrationSettings()
_TENSORRT = TensorRTOptions()
_BOUNDED = QUEUE_POLICIES["bounded"]


# ``--engine`` left out: the family's default engine for these flags (None: the build's).
DefaultEngine = Callable[[argparse.Namespace], str | None]


def parse_build_args(
    parser: argparse.ArgumentParser,
    argv: list[str] | None = None,
    default_engine: DefaultEngine | None = None,
) -> argparse.Namespace:
    """Parse, then check the flags convert into :class:`BuildOptions` (with the family's
    default engine where ``--engine`` is left out): an inconsistent combination is a usage
    error (exit 2) before any work, not a traceback."""
    args = parser.parse_args(argv)
    engine = default_engine(args) if default_engine else None
    try:
        build_options(args, default_engine=engine)
    except ValueError as exc:
        left_out = f" (--engine left out: {args.family} builds with --engine {engine})"
        parser.error(str(exc) + (left_out if engine and args.engine is None else ""))
    return args


def build_options(
    args: argparse.Namespace, family: str | None = None, default_engine: str | None = None
) -> BuildOptions:
    """The typed options from parsed flags: the only place a Namespace becomes values.
    ``--engine`` left out: ``default_engine`` (the family's), else the build's."""
    tensorrt = {name: getattr(args, name) for name in TensorRTOptions.__dataclass_fields__}
    engine = args.engine or default_engine or _BUILD.engine.value
    return BuildOptions(
        family=family,
        precision=args.precision or default_precision(engine),
        engine=engine,
        dry_run=args.dry_run,
        output_repository=args.output_repository,
        work_dir=args.work_dir,
        max_batch_size=args.max_batch_size,
        instances=args.instances,
        threads=args.threads,
        calibration=CalibrationSettings(
            method=args.calibration_method,
            size=args.calibration_size,
            percentile=args.calibration_percentile,
        ),
        int8_keep_float=tuple(args.int8_keep_float or ()),
        tensorrt=TensorRTOptions(**tensorrt),
        aoti=AotiOptions(cxx=args.aoti_cxx or None),
        shape_ranges=tuple(args.shape_range or ()),
        queue=queue_policy(args.queue_policy, args.max_queue_size, args.queue_timeout_ms),
    )


def default_precision(engine: str) -> str:
    """``--precision`` unset: CTranslate2's int8 weights for ``--engine ctranslate2`` (the
    in-process peer it is measured against), else the build's default."""
    return "int8" if engine == "ctranslate2" else _BUILD.precision


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    common = parser.add_argument_group("common options")
    common.add_argument(
        "--output-repository",
        type=Path,
        default=_BUILD.output_repository,
        help=f"Triton model repository to write into (default: {_BUILD.output_repository})",
    )
    common.add_argument(
        "--work-dir",
        type=Path,
        default=_BUILD.work_dir,
        help="where intermediate files (ONNX exports, calibration caches) go "
        f"(default: {_BUILD.work_dir})",
    )
    common.add_argument(
        "--max-batch-size", type=int, default=None, help="max_batch_size (default: per family)"
    )
    common.add_argument(
        "--instances",
        type=int,
        default=None,
        help="model instances per model (default: per family; 1, or 2 for bert). The one-model "
        "`bert` runs its ONNX Runtime encoder in one instance with instances x threads "
        "threads (a lone client's requests would otherwise alternate between "
        "stubs and run on cold caches)",
    )
    common.add_argument(
        "--threads",
        type=int,
        default=None,
        help="ONNX Runtime intra-op threads per instance (default: per family; all cores "
        f"({os.cpu_count()} here) split between the instances)",
    )
    common.add_argument(
        "--precision",
        choices=list(PRECISIONS),
        default=None,
        help="numeric precision, applied on the ONNX graph: fp16 casts, int8 Q/DQ from "
        "calibration, int8-dynamic INT8 weights and run-time activation scales (ONNX "
        "Runtime, CPU only, no calibration; PyTorch's for nmt --engine torch --search engine); "
        "with --engine ctranslate2, CTranslate2's int8 or float32 weights "
        f"(default: {_BUILD.precision}; int8 with --engine ctranslate2)",
    )
    common.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default=None,
        help="serve the ONNX with onnxruntime, compile a TensorRT plan (needs TensorRT), "
        "serve TorchScript with the PyTorch backend, or an AOTInductor package with the "
        "opt-in pytorch_aoti backend (aoti: resnet50; `python -m "
        "triton_kit.server.native_backends build pytorch_aoti` builds it), or the whole NMT "
        "model converted by CTranslate2 for the kit's ctranslate2 backend (ctranslate2: nmt; "
        "`make backends` builds it). Default: the family's: "
        f"{_BUILD.engine.value} for resnet50 and bert; for nmt its --architecture's (`nmt "
        "--help` lists each and why)",
    )
    common.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan of work (and trtexec command for --engine tensorrt) and write "
        "nothing: no ONNX export, no repository files",
    )
    add_queue_arguments(parser)
    add_precision_arguments(parser)
    add_tensorrt_arguments(parser)
    add_aoti_arguments(parser)


def add_export_arguments(
    group: argparse._ArgumentGroup,
    *,
    seed: int,
    queue_delay_us: int | None,
    delayed: str,
    default_note: str = "",
) -> None:
    """--seed and --queue-delay-us, which the families that export a model take (bert,
    resnet50), with their defaults from the family's options; ``delayed`` says which of the
    family's models the queue delay applies to. A ``queue_delay_us`` default of None means
    "not given" (the family picks: ``default_note`` says how), so that 0 can be asked for."""
    group.add_argument("--seed", type=int, default=seed, help="seed for random initialisation")
    group.add_argument(
        "--queue-delay-us",
        type=_non_negative,
        default=queue_delay_us,
        help=f"dynamic batcher max queue delay (microseconds) of {delayed}; 0 (default"
        f"{default_note}): an idle instance never waits, requests that queued while it was "
        "busy form its batch",
    )


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def add_queue_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("queue of every dynamically batched model")
    group.add_argument(
        "--queue-policy",
        choices=list(QUEUE_POLICIES),
        default=queue_policy_name(_BUILD.queue),
        help="bounded: a queue of --max-queue-size requests and a --queue-timeout-ms default "
        "timeout (a client's deadline may shorten it) that rejects excess requests at once "
        "(UNAVAILABLE, the SDK's ServerOverloadedError); but on Triton 2.51 any queue policy "
        "stops the dynamic batcher's prefetching, so a lone request arriving while the "
        "instance finishes a batch can wait 500 ms. off writes no policy: prefetching stays "
        "on and, under overload, the queue grows (default: %(default)s)",
    )
    group.add_argument(
        "--max-queue-size",
        type=_non_negative,
        metavar="N",
        help="with --queue-policy bounded: requests queued per model before new ones are "
        f"rejected (default: {_BOUNDED.max_queue_size}; 0: no size limit)",
    )
    group.add_argument(
        "--queue-timeout-ms",
        type=_non_negative,
        metavar="MS",
        help="with --queue-policy bounded: a request not started after MS is rejected "
        f"(default: {_BOUNDED.default_timeout_us // 1000}; 0: only clients' deadlines)",
    )


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


def add_aoti_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("AOTInductor (--engine aoti)")
    group.add_argument(
        "--aoti-cxx",
        default=os.environ.get(CXX_ENV),
        metavar="CXX",
        help="C++ compiler Inductor builds the package with (default: $TRITON_KIT_AOTI_CXX, "
        "else Inductor's own choice, $CXX or g++); on a host whose compiler links libstdc++ "
        "statically, give /usr/bin/g++ (benchmarks/results/gpu_aoti.md)",
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
        choices=list(HARDWARE_LEVELS),
        default=_TENSORRT.hardware_compatibility_level,
        help="GPUs other than the building one that may run the plan (default: %(default)s; "
        "same-compute-capability needs TensorRT 10.9+)",
    )
    group.add_argument(
        "--dla-core",
        type=int,
        default=_TENSORRT.dla_core,
        help="build for this DLA core, GPU fallback (Jetson)",
    )
    group.add_argument(
        "--timing-cache",
        type=Path,
        default=_TENSORRT.timing_cache,
        help="persistent timing cache (default: <work-dir>/tensorrt/timing.cache)",
    )
    group.add_argument(
        "--profiling-verbosity",
        choices=list(PROFILING_VERBOSITY),
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
        "--cuda-graphs",
        action="store_true",
        help="tensorrt, and aoti on a GPU: config optimization { cuda { graphs: true } } (aoti: "
        "the kit's pytorch_aoti build replays a graph per batch size); torch on a GPU: serve "
        "each model whose input shapes are fixed (resnet50_model) by the CUDA-graph python "
        "model, one graph per batch bucket, instead of Triton's own pytorch backend",
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
