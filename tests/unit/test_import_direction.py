"""Data flows one way: triton_kit.build_engines writes the repository, triton_kit/server/ and
triton_kit/python_models/ read it.

And no package imports itself round a circle: a circle means two modules that cannot be read,
tested or moved apart (the walk counts lazy and ``TYPE_CHECKING`` imports too).

A server (or a python-backend model inside the serving container) that imported the build
package would drag ONNX export, calibration and TensorRT building into the serving image, and
couple what is served to how it was built. The contract both sides share lives on the server
side (``triton_kit.python_models.common.tensorrt_sidecar``,
``triton_kit.server.tensorrt_device``)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT

ROOT = PROJECT_ROOT
KIT = "triton_kit"
SERVING = (f"{KIT}/server", f"{KIT}/python_models")
PRODUCT = (KIT,)


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
    probe.write_text("def f():\n    from triton_kit.build_engines.engines.tensorrt import device\n")
    assert imported_modules(probe) == ["triton_kit.build_engines.engines.tensorrt"]


@pytest.mark.parametrize("path", serving_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_serving_code_never_imports_build_engines(path: Path) -> None:
    wrong = [m for m in imported_modules(path) if m.startswith(f"{KIT}.build_engines")]
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_targets(path: Path, name: str, modules: set[str]) -> set[str]:
    """The known modules a file imports: ``from a import b`` is ``a.b`` where that is a
    module, else ``a``; relative imports are resolved against the file's package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
                break
    return targets


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    files = {
        module_name(p, root): p
        for package in packages
        for p in (root / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    return {name: import_targets(path, name, set(files)) for name, path in files.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_the_circle_walk_finds_a_planted_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\n")  # into the circle, not part of it
    graph = import_graph(tmp_path, ["pkg"])
    assert import_circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (package / "c.py").write_text("")
    assert import_circles(import_graph(tmp_path, ["pkg"])) == []


def test_no_import_circles_in_the_product() -> None:
    circles = import_circles(import_graph(ROOT, PRODUCT))
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)
