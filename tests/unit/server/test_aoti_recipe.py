"""The opt-in ``pytorch_aoti`` native backend (issue 30): built only when named, picked up by
the launcher where built, refused with its own build command where not."""

from __future__ import annotations

from pathlib import Path

from triton_kit.server.binary import missing_native_backends
from triton_kit.server.model_backends import backend_table, native_backends_needed
from triton_kit.server.native_backends import aoti, frameworks
from triton_kit.server.native_backends.__main__ import parse
from triton_kit.server.native_backends.aoti import AOTI_BACKEND, SCRIPT

CONFIG = """name: "resnet50_model"
backend: "pytorch_aoti"
platform: "torch_aoti"
max_batch_size: 16
"""


def test_build_leaves_it_out_unless_named(tmp_path: Path) -> None:
    assert AOTI_BACKEND not in parse(["build", "--out", str(tmp_path)]).backends
    assert parse(["build", "pytorch_aoti", "--out", str(tmp_path)]).backends == (AOTI_BACKEND,)
    assert SCRIPT.is_file()


def test_a_repository_that_needs_it_names_its_build_command(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "repo" / "resnet50_model").mkdir(parents=True)
    (tmp_path / "repo" / "resnet50_model" / "config.pbtxt").write_text(CONFIG)
    needed = native_backends_needed(tmp_path / "repo")
    assert needed == {AOTI_BACKEND: ["resnet50_model"]}
    assert "AOTInductor" in dict(backend_table(tmp_path / "repo"))["resnet50_model"]
    monkeypatch.setenv("TRITON_KIT_NATIVE_BACKENDS", str(tmp_path / "none-built"))
    (tmp_path / "backends").mkdir()
    missing = missing_native_backends(tmp_path / "backends", set(needed))
    assert "native_backends build pytorch_aoti" in missing[AOTI_BACKEND]


def test_the_recipe_covers_the_sources_the_script_copies_in(tmp_path: Path, monkeypatch) -> None:
    """An edit to a file under scripts/gpu/pytorch_aoti (cuda_graphs.hh) rebuilds the backend
    instead of serving the previous build as up to date."""
    framework = frameworks.require("torch")
    header = tmp_path / "cuda_graphs.hh"
    header.write_text("// one\n")
    monkeypatch.setattr(aoti, "PATCH_SOURCES", tmp_path)
    before = aoti.recipe_key(framework, None)
    header.write_text("// two\n")
    assert aoti.recipe_key(framework, None) != before
