"""``python -m build_engines <family>``: export, verify, lower precision, write the repository."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

from build_engines.steps import BuildError

# family -> (module, one-line help). Modules are imported only when chosen, so
# `--help` stays fast and a missing optional dependency only affects its family.
FAMILIES: dict[str, tuple[str, str]] = {
    "resnet50": ("build_engines.resnet50", "ResNet-50 image classification (ensemble resnet50)"),
    "bert": ("build_engines.bert", "BERT sentence embeddings (ensemble bert)"),
    "nmt": ("build_engines.nmt", "Marian encoder-decoder translation (BLS model nmt)"),
}
ALL_ORDER = ["resnet50", "bert", "nmt"]


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    common = parser.add_argument_group("common options")
    common.add_argument(
        "--output-repository",
        type=Path,
        default=Path("model_repository"),
        help="Triton model repository to write into (default: model_repository)",
    )
    common.add_argument(
        "--work-dir",
        type=Path,
        default=Path("build"),
        help="where intermediate files (ONNX exports, calibration caches) go (default: build)",
    )
    common.add_argument(
        "--max-batch-size", type=int, default=None, help="max_batch_size (default: per family)"
    )
    common.add_argument(
        "--instances", type=int, default=1, help="model instances per model (default: 1)"
    )
    common.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="ONNX Runtime intra-op threads per instance (default: all cores, %(default)s here)",
    )
    common.add_argument(
        "--precision",
        choices=["fp32", "fp16", "int8"],
        default="fp32",
        help="numeric precision, applied on the ONNX graph (default: fp32)",
    )
    common.add_argument(
        "--engine",
        choices=["onnxruntime", "tensorrt"],
        default="onnxruntime",
        help="serve the ONNX with onnxruntime, or compile a TensorRT plan (needs TensorRT)",
    )
    common.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan of work (and trtexec command for --engine tensorrt); build nothing",
    )
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m build_engines",
        description="Export models to ONNX, check them against their PyTorch source, lower "
        "precision on the ONNX graph, optionally compile TensorRT plans, and write a Triton "
        "model repository.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub = parser.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family, (module_name, help_text) in FAMILIES.items():
        family_parser = sub.add_parser(
            family,
            help=help_text,
            description=_module_doc(module_name) or help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_common_arguments(family_parser)
        module = _try_import(module_name)
        if module is not None and hasattr(module, "add_arguments"):
            module.add_arguments(family_parser)
    everything = sub.add_parser("all", help="build every family with its defaults")
    add_common_arguments(everything)
    return parser


def _module_doc(module_name: str) -> str | None:
    module = _try_import(module_name)
    return (module.__doc__ or "").strip() if module else None


def _try_import(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def run_family(family: str, args: argparse.Namespace) -> None:
    module = _try_import(FAMILIES[family][0])
    if module is None or not hasattr(module, "build"):
        raise BuildError(f"family '{family}' is not available in this checkout")
    start = time.perf_counter()
    module.build(args)
    print(f"== {family}: built in {time.perf_counter() - start:.0f} s ==", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    families = ALL_ORDER if args.family == "all" else [args.family]
    try:
        for family in families:
            if args.family == "all":
                family_args = parser.parse_args([family, *(argv or sys.argv[1:])[1:]])
            else:
                family_args = args
            run_family(family, family_args)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    return 0
