"""Step 1, ``build``: the family's module exported with a dynamic batch and compiled into an
AOTInductor package, every compile and link command logged, with the libraries the package's
.so files need; the eager module's outputs are kept beside it (``<package>.ref``) for the
checks in process and served, and a record of the build, so a later run given the same
folder reuses the package (``--package-dir``: goals.sh builds a call's packages side by side).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.aoti.options import Options


def logged_compiles(log: Path) -> None:
    """Log every command Inductor's C++ builder runs (which compiler, which link flags)."""
    from torch._inductor import cpp_builder

    original = cpp_builder._run_compile_cmd

    def run(cmd_line: str, cwd: str) -> None:
        with log.open("a") as sink:
            sink.write(cmd_line + "\n")
        original(cmd_line, cwd)

    cpp_builder._run_compile_cmd = run


def built(module, package: Path, options: Options) -> dict:
    """``package`` as an earlier build of this family left it (its record, ``"reused"``
    added), else built now. One built for another family or size is refused, not rebuilt."""
    record = Path(f"{package}.build.json")
    made_for = {"family": options.family, "smoke": options.smoke}
    if package.exists() and Path(f"{package}.ref").exists() and record.exists():
        found = json.loads(record.read_text())
        if found.get("for") != made_for:
            raise ValueError(f"{package} was built for {found.get('for')}, not {made_for}")
        return found | {"reused": True}
    found = {"for": made_for, **build(module, package, options)}
    record.write_text(json.dumps(found, indent=2) + "\n")
    return found


def build(module, package: Path, options: Options) -> dict:
    import torch

    spec = options.spec
    logged_compiles(options.out / spec.report.replace(".json", "-compile-commands.txt"))
    if options.cxx:
        torch._inductor.config.cpp.cxx = (None, options.cxx)
    if spec.channels_last:
        module = module.to(memory_format=torch.channels_last)
    device = options.settings.device
    inputs = tuple(
        torch.from_numpy(a).to(device) for a in spec.example(np.random.default_rng(0), 8)
    )
    batch = torch.export.Dim("batch", min=1, max=spec.max_batch)
    started = time.perf_counter()
    with torch.no_grad():
        program = torch.export.export(
            module, inputs, dynamic_shapes=tuple({0: batch} for _ in inputs)
        )
        exported_s = time.perf_counter() - started
        torch._inductor.aoti_compile_and_package(program, package_path=str(package))
        reference = module(*inputs).float().cpu()
    torch.save({"inputs": [x.cpu() for x in inputs], "outputs": reference}, str(package) + ".ref")
    return {
        "build_s": round(time.perf_counter() - started, 1),
        "export_s": round(exported_s, 1),
        "cxx": torch._inductor.config.cpp.cxx[1],
        "env_cxx": os.environ.get("CXX"),
        "libraries": needed(package),
    }


def needed(package: Path) -> dict:
    """Each .so in the package: its NEEDED libraries (is libstdc++ shared or inside?)."""
    work = Path(tempfile.mkdtemp(prefix="aoti-so-"))
    with zipfile.ZipFile(package) as archive:
        names = [n for n in archive.namelist() if n.endswith(".so")]
        archive.extractall(work, names)
    found = {}
    for name in names:
        dynamic = subprocess.run(["readelf", "-d", str(work / name)], capture_output=True,
                                 text=True).stdout  # fmt: skip
        found[Path(name).name] = [ln.split("[")[1].rstrip("]") for ln in dynamic.splitlines()
                                  if "(NEEDED)" in ln]  # fmt: skip
    return found
