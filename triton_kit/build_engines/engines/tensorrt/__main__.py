"""``python -m triton_kit.build_engines.engines.tensorrt [MODEL ...]``: the TensorRT plan of work
for built models.

For every ONNX model already in the repository (``platform: "onnxruntime_onnx"``),
print what ``--engine tensorrt`` would do with it: precision lowering, optimisation
profiles, the tensorrt_plan config.pbtxt and the equivalent trtexec command. It
reads the served config and the ONNX beside it, so it needs neither TensorRT nor the
family's build code, and writes nothing. Takes the same options as the build.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from triton_kit.build_engines.dry_run import describe
from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.flags import add_common_arguments, build_options, parse_build_args
from triton_kit.build_engines.repository import parse


def onnx_models(repository: Path, names: list[str]) -> list[tuple[str, Path, object]]:
    found = []
    for config_path in sorted(Path(repository).glob("*/config.pbtxt")):
        config = parse(config_path.read_text())
        onnx_path = config_path.parent / "1" / (config.default_model_filename or "model.onnx")
        wanted = not names or config.name in names
        if wanted and config.platform == "onnxruntime_onnx" and onnx_path.exists():
            found.append((config.name, onnx_path, config))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.build_engines.engines.tensorrt", description=__doc__
    )
    add_common_arguments(parser)
    parser.add_argument("models", nargs="*", help="model names (default: every ONNX model)")
    args = parse_build_args(parser, argv)
    options = replace(build_options(args), engine=Engine.TENSORRT, dry_run=True, family=None)
    models = onnx_models(options.output_repository, args.models)
    if not models:
        print(f"no ONNX models in {options.output_repository}; build them first", file=sys.stderr)
        return 1
    for name, onnx_path, config in models:
        print(describe(name, onnx_path, config, options), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
