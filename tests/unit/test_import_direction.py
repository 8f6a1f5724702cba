"""Data flows one way: build_engines writes the repository, server/ and python_models/ read it.

A server (or a python-backend model inside the serving container) that imported the build
package would drag ONNX export, calibration and TensorRT building into the serving image, and
couple what is served to how it was built. The contract both sides share lives on the server
side (``python_models.common.tensorrt_sidecar``, ``server.tensorrt_device``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT

ROOT = PROJECT_ROOT
SERVING = ("server", "python_models")


def imported_modules(path: Path) -> list[str]:
    """Every module an ``import``/``from`` statement anywhere in the file names (lazy ones too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def serving_files() -> list[Path]:
    return sorted(p for package in SERVING for p in (ROOT / package).rglob("*.py"))


def test_the_walk_sees_lazy_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from build_engines.tensorrt import device\n")
    assert imported_modules(probe) == ["build_engines.tensorrt"]


@pytest.mark.parametrize("path", serving_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_serving_code_never_imports_build_engines(path: Path) -> None:
    wrong = [m for m in imported_modules(path) if m.split(".")[0] == "build_engines"]
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"
