"""The build's shape: flags become typed options once, steps never see the Namespace; its
three axes (families, engines, precision) in folders a newcomer can see, none too large.

An ``argparse.Namespace`` reaching a build step is how defaults came to live in five places
(``getattr(args, name, fallback)``); these walks of the source keep it at the edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.prerequisites import PROJECT_ROOT

ROOT = PROJECT_ROOT
BUILD = ROOT / "triton_kit" / "build_engines"
# Where parsed flags may be read: the CLI, the flag definitions, each family's conversion to
# its own frozen options and its default engine for those flags (nmt's is per architecture),
# and the stand-alone training scripts' own mains.
NAMESPACE_READERS = {
    "build_options",
    "family_options",
    "family_engine",
    "default_engine",
    "options_from",
    "run_family",
    "main",
}


def _functions(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def _takes_namespace(function: ast.FunctionDef) -> bool:
    annotations = [a.annotation for a in function.args.args if a.annotation is not None]
    return any("Namespace" in ast.unparse(a) for a in annotations)


def test_only_the_edge_reads_the_namespace() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{function.lineno} {function.name}"
        for path in sorted(BUILD.rglob("*.py"))
        for function in _functions(path)
        if _takes_namespace(function) and function.name not in NAMESPACE_READERS
    ]
    assert wrong == [], "steps taking an argparse.Namespace"


def test_no_getattr_fallbacks_anywhere_in_the_build() -> None:
    wrong = []
    for path in sorted(BUILD.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            is_getattr = isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr"
            if is_getattr and len(node.args) == 3:  # getattr(args, "x", fallback)
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert wrong == []


def test_tensorrt_main_does_not_import_the_cli() -> None:
    tree = ast.parse((BUILD / "engines" / "tensorrt" / "__main__.py").read_text())
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert (
        "triton_kit.build_engines.cli" not in modules
        and "triton_kit.build_engines.flags" in modules
    )


MAX_MODULES = 16


def test_no_folder_of_the_kit_holds_more_than_16_modules() -> None:
    """A folder per concern, small enough to read: past 16 modules it needs subpackages."""
    kit = ROOT / "triton_kit"
    folders = {p.parent for p in kit.rglob("*.py") if "__pycache__" not in p.parts}
    crowded = {
        str(f.relative_to(ROOT)): n
        for f in sorted(folders)
        if (n := len(list(f.glob("*.py")))) > MAX_MODULES
    }
    assert crowded == {}, f"folders with more than {MAX_MODULES} modules"


def _kit_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("triton_kit.")}


def test_engines_and_precision_know_no_family() -> None:
    """The axes meet only in the families: an engine or a precision step that imported a
    family could not serve the next one (NMT-only TorchScript lives in families/nmt/)."""
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for axis in ("engines", "precision")
        for path in sorted((BUILD / axis).rglob("*.py"))
        for name in sorted(_kit_imports(path))
        if name.startswith("triton_kit.build_engines.families")
    ]
    assert wrong == []
