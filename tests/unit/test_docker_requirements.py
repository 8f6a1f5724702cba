"""docker/requirements-*.txt are written from pyproject.toml's extras
(scripts/docker_requirements.py, ``make docker-requirements``): a checked-in file that differs
from what the generator writes fails here, so the extras stay the one list."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

from tests.support.prerequisites import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "docker_requirements.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docker_requirements", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


generator = _generator()


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """pyproject.toml and docker/requirements-*.txt as checked in, somewhere to spoil them."""
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "docker").mkdir()
    for file in generator.FILES:
        shutil.copy(PROJECT_ROOT / file.path, tmp_path / file.path)
    return tmp_path


def test_checked_in_files_are_what_the_generator_writes() -> None:
    done = check(PROJECT_ROOT)
    assert done.returncode == 0, done.stderr


def test_a_file_edited_by_hand_fails_the_check(checkout: Path) -> None:
    path = checkout / "docker/requirements-triton.txt"
    path.write_text(path.read_text() + "requests>=2\n")
    done = check(checkout)
    assert done.returncode == 1
    assert "docker/requirements-triton.txt" in done.stderr and "+requests>=2" not in done.stderr
    assert "-requests>=2" in done.stderr


def test_an_extra_changed_without_regenerating_fails_the_check(checkout: Path) -> None:
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    assert '"tokenizers>=0.20,<1"' in text
    pyproject.write_text(text.replace('"tokenizers>=0.20,<1"', '"tokenizers>=0.21,<1"'))
    done = check(checkout)
    assert done.returncode == 1
    assert "+tokenizers>=0.21,<1" in done.stderr
    assert "requirements-triton.txt" in done.stderr and "requirements-build.txt" in done.stderr


def test_writing_makes_the_check_pass(checkout: Path) -> None:
    (checkout / "docker/requirements-loadtest.txt").write_text("locust\n")
    written = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(checkout)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert written.stdout.strip() == "wrote docker/requirements-loadtest.txt"
    assert check(checkout).returncode == 0
    assert (checkout / "docker/requirements-loadtest.txt").read_text() == (
        PROJECT_ROOT / "docker/requirements-loadtest.txt"
    ).read_text()


def test_flatten_follows_included_extras_and_merges_a_package_named_twice() -> None:
    project = {
        "dependencies": ["numpy>=1.26", "tritonclient[grpc,http]>=2.51,<3"],
        "optional-dependencies": {
            "stub": ["numpy>=1.26,<2", "onnx>=1.17,<2"],
            "image": ["triton-kit[stub]", "tritonclient[grpc]>=2.51,<3", "Pillow>=10"],
        },
    }
    flat = [str(r) for r in generator.flatten(project, "image", sdk=True)]
    assert flat == [
        "numpy>=1.26,<2",
        "tritonclient[grpc,http]>=2.51,<3",
        "onnx>=1.17,<2",
        "Pillow>=10",
    ]
    assert [str(r) for r in generator.flatten(project, "stub", sdk=False)] == [
        "numpy>=1.26,<2",
        "onnx>=1.17,<2",
    ]
    with pytest.raises(KeyError, match="nosuch"):
        generator.flatten(project, "nosuch", sdk=False)


def test_every_image_extra_is_in_dev() -> None:
    """make setup installs dev, so the tests run with every package an image installs."""
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    reached, queue = set(), ["dev"]
    while queue:
        name = queue.pop()
        reached.add(name)
        for line in extras[name]:
            if line.startswith("triton-kit["):
                inner = line[len("triton-kit[") : line.index("]")].split(",")
                queue += [e for e in inner if e not in reached]
    assert {file.extra for file in generator.FILES} <= reached


def test_the_stub_extra_names_no_engine_library() -> None:
    """No default python model imports one (issue 31): onnx and onnxruntime are the opt-in
    Python search's (``python-search``), which serve and export include; the Triton image's
    file has neither."""
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    engines = {"onnx", "onnxruntime", "torch", "ctranslate2", "tensorrt"}

    def names(lines: list[str]) -> set[str]:
        return {generator.canonical(generator.Requirement.parse(line).name) for line in lines}

    assert not names(extras["stub"]) & engines
    assert {"onnx", "onnxruntime"} <= names(extras["python-search"])
    assert "triton-kit[python-search]" in extras["serve"]
    assert "triton-kit[python-search]" in extras["export"]
    triton = (PROJECT_ROOT / "docker/requirements-triton.txt").read_text().splitlines()
    assert not names([line for line in triton if line and not line.startswith("#")]) & engines
