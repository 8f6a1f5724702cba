"""The ``trtexec`` command line equivalent to a Python-API build, and a reproduce script.

Flags (TensorRT version that needs them):
  --onnx, --saveEngine, --minShapes/--optShapes/--maxShapes      all 8.x+
  --memPoolSize=workspace:<N>M  (replaced --workspace)           8.4+, the only form in 10.x
  --stronglyTyped                                                10.x; a no-op in 11.x (always on)
  --builderOptimizationLevel=N, --versionCompatible,
  --hardwareCompatibilityLevel=ampere+                           8.6+
  --hardwareCompatibilityLevel=sameComputeCapability             10.x (newer releases)
  --timingCacheFile=<file>                                        8.0+
  --sparsity=enable                                               8.0+
  --useDLACore=N, --allowGPUFallback                              all (Jetson/DRIVE with DLA)
  --profilingVerbosity=layer_names_only|detailed|none             8.2+
  --skipInference (build only, no timing run)                     8.x+
Several profiles: ``--profile=N`` before each --minShapes/--optShapes/--maxShapes trio
(samples/common/sampleOptions.cpp, 10.5 and 11.x: "Multiple --minShapes/--optShapes/--maxShapes
without --profile are not allowed"). Tensor names are single-quoted in shape specs so that
names holding ':' parse (sampleOptions.cpp, splitNameAndValue).
trtexec ships in nvcr.io/nvidia/tensorrt:<yy.mm>-py3 (on PATH) and, per Triton's r24.10 QA
scripts (qa/L0_perf_resnet/test.sh), at /usr/src/tensorrt/bin/trtexec in the tritonserver
image, off PATH.
No precision flags: precision is already in the ONNX (FP16 casts / Q/DQ), and 11.x removed them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from triton_kit.build_engines.engines.tensorrt.options import TensorRTOptions
from triton_kit.build_engines.engines.tensorrt.profiles import Profile

_HARDWARE_FLAG = {"ampere+": "ampere+", "same-compute-capability": "sameComputeCapability"}


TRTEXEC_IN_SERVING_IMAGE = "/usr/src/tensorrt/bin/trtexec"
TENSORRT_IMAGE = "nvcr.io/nvidia/tensorrt:<yy.mm>-py3"


def shapes_flag(profile: Profile, which: str) -> str:
    """``name:1x3x224x224,other:...`` for --minShapes/--optShapes/--maxShapes."""
    return ",".join(
        f"{_quoted(name)}:{'x'.join(str(d) for d in getattr(r, which))}"
        for name, r in profile.shapes
    )


def _quoted(name: str) -> str:
    """trtexec splits ``name:dims`` on the last ':'; a name holding ':' must be quoted."""
    return f"'{name}'" if ":" in name else name


def trtexec_command(
    onnx_path: Path, plan_path: Path, profiles: Sequence[Profile], options: TensorRTOptions
) -> list[str]:
    command = ["trtexec", f"--onnx={onnx_path}", f"--saveEngine={plan_path}", "--stronglyTyped"]
    for index, profile in enumerate(profiles):
        if len(profiles) > 1:
            command.append(f"--profile={index}")
        command += [
            f"--minShapes={shapes_flag(profile, 'min')}",
            f"--optShapes={shapes_flag(profile, 'opt')}",
            f"--maxShapes={shapes_flag(profile, 'max')}",
        ]
    command.append(f"--memPoolSize=workspace:{int(options.workspace_gb * 1024)}M")
    command.append(f"--builderOptimizationLevel={options.builder_optimization_level}")
    command.append(f"--profilingVerbosity={options.profiling_verbosity}")
    if options.timing_cache is not None:
        command.append(f"--timingCacheFile={options.timing_cache}")
    if options.sparsity:
        command.append("--sparsity=enable")
    if options.version_compatible:
        command.append("--versionCompatible")
    if options.hardware_compatibility_level != "none":
        flag = _HARDWARE_FLAG[options.hardware_compatibility_level]
        command.append(f"--hardwareCompatibilityLevel={flag}")
    if options.dla_core is not None:
        command += [f"--useDLACore={options.dla_core}", "--allowGPUFallback"]
    command.append("--skipInference")  # build only, as the Python builder does
    return command


def render(command: Sequence[str]) -> str:
    """One flag per line, shell-quoted, for logs and scripts."""
    return " \\\n    ".join(shlex.quote(part) for part in command)


def reproduce_script(command: Sequence[str], rebuild: str, header: str) -> str:
    """A bash script beside the plan: the same build with trtexec, and the kit's own command."""
    return (
        "#!/usr/bin/env bash\n"
        f"# {header}\n"
        "# Run from the repository root, inside the image that serves the plan (same TensorRT,\n"
        "# same GPU model). The kit's own command for the same build:\n"
        f"#   {rebuild}\n"
        "set -euo pipefail\n"
        "# trtexec: $TRTEXEC, else on PATH (nvcr.io/nvidia/tensorrt images), else where the\n"
        f"# tritonserver image keeps it ({TRTEXEC_IN_SERVING_IMAGE}).\n"
        f'TRTEXEC="${{TRTEXEC:-$(command -v trtexec || echo {TRTEXEC_IN_SERVING_IMAGE})}}"\n'
        'if [ ! -x "$TRTEXEC" ]; then\n'
        f'    echo "trtexec not found; run this in {TENSORRT_IMAGE} (same TensorRT as the '
        f'server) or set TRTEXEC" >&2\n'
        "    exit 127\n"
        "fi\n"
        f'"$TRTEXEC" \\\n    {render(command[1:])}\n'
    )
