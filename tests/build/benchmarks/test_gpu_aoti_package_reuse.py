"""``benchmarks.gpu.aoti --package-dir/--build-only`` on CPU (``--smoke``): a package built once
is reused by the next run of its family, not built again, and one built for something else is
refused. scripts/gpu/goals.sh builds a call's packages side by side this way, before any step
measures (each build took 94-117 s of a device call in session 43, one after another).

A real AOTInductor build of the smoke BERT (one layer, 64 wide) and real runs of the command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.benchmarks.gpu import aoti
from triton_kit.benchmarks.gpu.aoti.build import built
from triton_kit.benchmarks.gpu.aoti.in_process import check


def _build_only(packages: Path, out: Path) -> dict:
    command = [sys.executable, "-m", "triton_kit.benchmarks.gpu.aoti", "--smoke", "--build-only",
               "--family", "bert-base", "--package-dir", str(packages),
               "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "aoti-bert-base.json").read_text())
    assert "errors" not in results, results["errors"]
    assert set(results) == {"env", "build", "elapsed_s"}  # stopped after the build
    return results["build"]


@pytest.mark.slow
def test_a_package_built_once_is_reused_by_the_next_run(tmp_path: Path) -> None:
    packages, out = tmp_path / "packages", tmp_path / "out"
    first = _build_only(packages, out)
    package = packages / "bert_base_aoti.pt2"
    assert package.is_file() and Path(f"{package}.ref").is_file()
    assert "reused" not in first and first["build_s"] > 0
    commands = (out / "aoti-bert-base-compile-commands.txt").read_text()
    assert "g++" in commands  # Inductor's C++ builder ran

    again = _build_only(packages, out)
    assert again == first | {"reused": True}
    assert (out / "aoti-bert-base-compile-commands.txt").read_text() == commands  # no compile

    # The reused package still answers as the eager module did when it was built.
    import torch

    options = aoti.parse(["--out", str(out), "--smoke", "--family", "bert-base"])
    runner = torch._inductor.aoti_load_package(str(package))
    agreement = check(runner, package, options.spec, "cpu")
    assert agreement["max_abs_diff"] < 1e-3 and agreement["cosine_min"] > 0.9999


def test_a_package_built_for_another_family_is_refused(tmp_path: Path) -> None:
    package = tmp_path / "bert_base_aoti.pt2"
    for path in (package, Path(f"{package}.ref")):
        path.write_bytes(b"")
    record = {"for": {"family": "bert-base", "smoke": False}, "build_s": 90.0}
    Path(f"{package}.build.json").write_text(json.dumps(record))
    smoke = aoti.parse(["--out", str(tmp_path), "--smoke", "--family", "bert-base"])
    with pytest.raises(ValueError, match=r"was built for .*'smoke': False"):
        built(None, package, smoke)
    full = aoti.parse(["--out", str(tmp_path), "--family", "bert-base"])
    assert built(None, package, full) == record | {"reused": True}


def test_build_only_needs_a_package_folder(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--build-only"])
    options = aoti.parse(["--out", str(tmp_path), "--build-only", "--package-dir", "pk"])
    assert options.build_only and options.package_dir == Path("pk")
    assert aoti.parse(["--out", str(tmp_path)]).package_dir is None
