"""``python -m triton_kit.build_engines <family>``: export, verify, lower precision, write the
repository."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from triton_kit.build_engines.engines.step import step_of
from triton_kit.build_engines.flags import add_common_arguments, build_options, parse_build_args
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.steps import BuildError

# family -> (module, one-line help). Modules are imported only when chosen, so
# `--help` stays fast and a missing optional dependency only affects its family.
FAMILIES: dict[str, tuple[str, str]] = {
    "resnet50": (
        "triton_kit.build_engines.families.resnet50",
        "ResNet-50 image classification (ensemble resnet50)",
    ),
    "bert": ("triton_kit.build_engines.families.bert", "BERT sentence embeddings (ensemble bert)"),
    "nmt": (
        "triton_kit.build_engines.families.nmt",
        "Marian encoder-decoder translation (BLS model nmt)",
    ),
}
ALL_ORDER = ["resnet50", "bert", "nmt"]
# Measured on CPU (benchmarks/results/bert.md): BERT's mixed-length traffic batches poorly, so two
# single-threaded sessions serve more than one session with two threads.
DEFAULT_INSTANCES = {"bert": 2}


def family_options(family: str, args: argparse.Namespace) -> BuildOptions:
    """The typed options for one family, with --engine, --instances and --threads the user left
    out filled in (the family's engine; the cores are split between the instances)."""
    options = build_options(args, family=family, default_engine=family_engine(args))
    return options.with_family_defaults(DEFAULT_INSTANCES.get(family, 1), os.cpu_count() or 1)


def family_engine(args: argparse.Namespace) -> str | None:
    """``--engine`` left out: the family's own default (its module's ``default_engine(args)``,
    e.g. nmt's per architecture), else None (the build's)."""
    if args.family not in FAMILIES:  # "all": each family's, once its own flags are parsed
        return None
    module = _try_import(FAMILIES[args.family][0])
    if module is None or not hasattr(module, "default_engine"):
        return None
    return module.default_engine(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.build_engines",
        description="Export models to ONNX, check them against their PyTorch source, lower "
        "precision on the ONNX graph, optionally compile TensorRT plans, and write a Triton "
        "model repository.",
        epilog="FAMILY --help lists every option, among them --queue-policy bounded: a "
        "bounded queue that rejects excess requests at once on every dynamically batched "
        "model (off by default: on Triton 2.51 it stops the batcher's prefetching, and a lone "
        "request can wait 500 ms).",
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
    """Parse the flags into typed options ONCE, then build the family with them."""
    module = _try_import(FAMILIES[family][0])
    if module is None or not hasattr(module, "build"):
        raise BuildError(f"family '{family}' is not available in this checkout")
    options = family_options(family, args)
    if not options.dry_run:
        step_of(options.engine).check_available()  # fail in a second, not after the export
    start = time.perf_counter()
    module.build(options, module.options_from(args))
    print(f"== {family}: built in {time.perf_counter() - start:.0f} s ==", flush=True)


def build_from_argv(argv: list[str]) -> None:
    """``python -m triton_kit.build_engines FAMILY ...`` in-process, for tests and benchmarks:
    one family, BuildError on failure."""
    args = parse_build_args(build_parser(), argv, family_engine)
    run_family(args.family, args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_build_args(parser, argv, family_engine)
    if args.family == "all":  # each family with its own defaults, all checked before any work
        rest = (argv if argv is not None else sys.argv[1:])[1:]
        runs = [(f, parse_build_args(parser, [f, *rest], family_engine)) for f in ALL_ORDER]
    else:
        runs = [(args.family, args)]
    try:
        for family, family_args in runs:
            run_family(family, family_args)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    return 0
