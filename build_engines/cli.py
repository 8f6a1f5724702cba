"""``python -m build_engines <family>``: export, verify, lower precision, write the repository."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

from build_engines.engines import ENGINE_NAMES, Engine
from build_engines.steps import BuildError

# family -> (module, one-line help). Modules are imported only when chosen, so
# `--help` stays fast and a missing optional dependency only affects its family.
FAMILIES: dict[str, tuple[str, str]] = {
    "resnet50": ("build_engines.resnet50", "ResNet-50 image classification (ensemble resnet50)"),
    "bert": ("build_engines.bert", "BERT sentence embeddings (ensemble bert)"),
    "nmt": ("build_engines.nmt", "Marian encoder-decoder translation (BLS model nmt)"),
}
ALL_ORDER = ["resnet50", "bert", "nmt"]
# Measured on CPU (benchmarks/bert.md): BERT's mixed-length traffic batches poorly, so two
# single-threaded sessions serve more than one session with two threads.
DEFAULT_INSTANCES = {"bert": 2}


def apply_family_defaults(family: str, args: argparse.Namespace) -> argparse.Namespace:
    """Fill --instances/--threads the user left out: the cores are split between instances."""
    if args.instances is None:
        args.instances = DEFAULT_INSTANCES.get(family, 1)
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // args.instances)
    return args


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
        "--instances",
        type=int,
        default=None,
        help="model instances per model (default: per family; 1, or 2 for bert)",
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
        choices=["fp32", "fp16", "int8"],
        default="fp32",
        help="numeric precision, applied on the ONNX graph (default: fp32)",
    )
    common.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="onnxruntime",
        help="serve the ONNX with onnxruntime, compile a TensorRT plan (needs TensorRT), or "
        "serve TorchScript with the PyTorch backend (resnet50 only so far)",
    )
    common.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan of work (and trtexec command for --engine tensorrt); nothing is "
        "written to the repository; resnet50 writes nothing at all, bert and nmt export "
        "their ONNX into --work-dir to read its dynamic axes",
    )
    from build_engines.engines import add_engine_arguments  # precision and TensorRT options

    add_engine_arguments(parser)


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
    args = apply_family_defaults(family, args)
    module = _try_import(FAMILIES[family][0])
    if module is None or not hasattr(module, "build"):
        raise BuildError(f"family '{family}' is not available in this checkout")
    if not args.dry_run:
        Engine(args.engine).step().check_available()  # fail in a second, not after the export
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
