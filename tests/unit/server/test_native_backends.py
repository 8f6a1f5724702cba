"""The native-backend build refuses what it was not verified with, naming the fix."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from triton_kit.server.native_backends import NativeBackendError, built_library
from triton_kit.server.native_backends import sources as src
from triton_kit.server.native_backends.frameworks import installed
from triton_kit.server.native_backends.patches import Patch, apply
from triton_kit.server.native_backends.provenance import RECORD_NAME, Provenance

SHARED = src.DEFAULT_SOURCE_DIRS[0]


def test_an_archive_whose_sha256_differs_is_refused(tmp_path: Path) -> None:
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / src.SOURCES["core"].archive).write_bytes(b"not the r24.10 release")
    with pytest.raises(NativeBackendError, match=r"sha256 .* not the pinned"):
        src.fetch(["core"], tmp_path / "out", archives)
    assert not (tmp_path / "out" / "core").exists()


def test_a_missing_archive_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(NativeBackendError, match=r"core-r24\.10\.tar\.gz is missing"):
        src.fetch(["core"], tmp_path / "out", tmp_path)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no {SHARED} (the archives CI has)")
def test_the_pinned_sums_are_those_of_the_shipped_archives() -> None:
    listed = dict(
        reversed(line.split()) for line in (SHARED / "SHA256SUMS").read_text().splitlines()
    )
    for source in src.SOURCES.values():
        assert listed[source.archive] == source.sha256
        digest = hashlib.sha256((SHARED / source.archive).read_bytes()).hexdigest()
        assert digest == source.sha256


def _record(folder: Path, version: str) -> None:
    folder.mkdir(parents=True)
    (folder / "libtriton_onnxruntime.so").write_bytes(b"\x7fELF")
    Provenance("onnxruntime", "libtriton_onnxruntime.so", "onnxruntime", version, False, "k").write(
        folder
    )


def test_a_library_built_against_another_onnxruntime_is_stale(tmp_path: Path) -> None:
    _record(tmp_path / "onnxruntime", "0.0.1")
    here = installed("onnxruntime")
    assert here is not None
    with pytest.raises(NativeBackendError) as caught:
        built_library("onnxruntime", tmp_path)
    message = str(caught.value)
    assert "built against onnxruntime 0.0.1" in message
    assert f"onnxruntime here is {here.version}" in message
    assert "make backends" in message


def test_a_current_library_is_accepted(tmp_path: Path) -> None:
    here = installed("onnxruntime")
    assert here is not None
    _record(tmp_path / "onnxruntime", here.version)
    assert built_library("onnxruntime", tmp_path) == tmp_path / "onnxruntime" / (
        "libtriton_onnxruntime.so"
    )


def test_an_unbuilt_backend_names_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(NativeBackendError, match=f"no .*{RECORD_NAME}.*make backends"):
        built_library("pytorch", tmp_path)


def test_a_corrupt_record_counts_as_unbuilt(tmp_path: Path) -> None:
    (tmp_path / "pytorch").mkdir()
    (tmp_path / "pytorch" / RECORD_NAME).write_text(json.dumps({"backend": "pytorch"}))
    with pytest.raises(NativeBackendError, match="not built"):
        built_library("pytorch", tmp_path)


def test_a_patch_whose_text_is_gone_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / "common" / "src").mkdir(parents=True)
    (tmp_path / "common" / "src" / "CMakeLists.txt").write_text("project(x)\n")
    with pytest.raises(NativeBackendError, match="no longer contains 'add_subdirectory"):
        apply(tmp_path, ["common"], gpu=False)


def test_gpu_only_patches_are_left_out_of_cpu_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import triton_kit.server.native_backends.patches as patches

    target = tmp_path / "x.txt"
    target.write_text("old\n")
    monkeypatch.setitem(patches.PATCHES, "x", (Patch("x.txt", "old", "new", "why", True),))
    apply(tmp_path, ["x"], gpu=False)
    assert target.read_text() == "old\n"
    apply(tmp_path, ["x"], gpu=True)
    assert target.read_text() == "new\n"


def test_the_ctranslate2_backend_links_the_wheels_library_with_its_abi(tmp_path: Path) -> None:
    """The kit's ctranslate2 backend links the wheel's libctranslate2 (auditwheel's
    ``ctranslate2.libs``) with the C++ ABI its exports use; stale or unbuilt, it names
    ``make backends``, which builds it since it serves the default nmt."""
    from triton_kit.server.native_backends import frameworks

    here = installed("ctranslate2")
    assert here is not None
    library = frameworks.ctranslate2_library(here)
    assert library.parent.name == "ctranslate2.libs" and here.version in library.name
    assert frameworks.cxx11_abi(library)  # std::__cxx11 names, as `nm -D` shows
    old_abi = tmp_path / "libold.so"
    old_abi.write_bytes(b"_ZN11ctranslate210Translator15translate_batchERKSt6vectorISs")
    assert not frameworks.cxx11_abi(old_abi)
    with pytest.raises(NativeBackendError, match=r"make backends \(python -m .* build\)"):
        built_library("ctranslate2", tmp_path)
    folder = tmp_path / "ctranslate2"
    folder.mkdir()
    (folder / "libtriton_ctranslate2.so").write_bytes(b"")
    Provenance("ctranslate2", "libtriton_ctranslate2.so", "ctranslate2", "0.1", False, "k").write(
        folder
    )
    with pytest.raises(NativeBackendError, match=f"ctranslate2 here is {here.version}"):
        built_library("ctranslate2", tmp_path)


def test_the_ctranslate2_backend_builds_only_against_the_headers_release(tmp_path: Path) -> None:
    """The vendored headers decide the structs the backend fills (third_party/ctranslate2):
    the wheel whose library it links must be that very release, or the build stops and says
    which; the pin in pyproject.toml is that release."""
    from triton_kit.server.native_backends import ct2_backend, frameworks

    assert ct2_backend.HEADERS_RELEASE == "4.8.1"
    here = installed("ctranslate2")
    assert here is not None and here.version == ct2_backend.HEADERS_RELEASE
    ct2_backend.check_release(here)  # the installed wheel passes
    newer = frameworks.Framework(here.distribution, "4.8.5", here.package_dir)
    with pytest.raises(NativeBackendError, match=r"ctranslate2 4\.8\.5 .* headers are v4\.8\.1"):
        ct2_backend.check_release(newer)
    pyproject = (Path(ct2_backend.__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert f'"ctranslate2=={ct2_backend.HEADERS_RELEASE}"' in pyproject


def test_the_default_build_includes_the_ctranslate2_backend(tmp_path: Path) -> None:
    """`make backends` (``build`` with no backend named) builds what the default repository
    serves: Triton's onnxruntime and pytorch, and the kit's ctranslate2 for nmt_ct2."""
    from triton_kit.server.native_backends.__main__ import parse

    command = parse(["build", "--out", str(tmp_path)])
    assert command.backends == ("onnxruntime", "pytorch", "ctranslate2")
    assert parse(["build", "pytorch_aoti", "--out", str(tmp_path)]).backends == ("pytorch_aoti",)
