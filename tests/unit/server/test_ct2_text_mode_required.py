"""The default ``nmt`` is the kit's ctranslate2 backend in its text mode, which needs the backend
built with sentencepiece (Debian libsentencepiece-dev): without it, ``python -m
triton_kit.server.native_backends build`` says so loudly on stderr, and the launcher refuses to
start a repository with a text-mode model before anything starts, naming the package, the
rebuild and ``--no-ct2-text``. Nothing falls back to another layout."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from triton_kit.server import BackendUnavailableError, ServerConfig, TritonServer
from triton_kit.server.model_backends import ct2_text_models
from triton_kit.server.native_backends import ct2_backend
from triton_kit.server.native_backends.build import BuildSettings
from triton_kit.server.native_backends.provenance import RECORD_NAME, Provenance

TEXT_CONFIG = """name: "nmt"
backend: "ctranslate2"
max_batch_size: 32
parameters { key: "source_spm" value { string_value: "source.spm" } }
"""
IDS_CONFIG = """name: "nmt_ct2"
backend: "ctranslate2"
max_batch_size: 32
"""


def _repository(root: Path, **configs: str) -> Path:
    for name, config in configs.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
    return root


def _backends(root: Path, library: bytes) -> Path:
    folder = root / "backends" / ct2_backend.CT2_BACKEND
    folder.mkdir(parents=True)
    (folder / ct2_backend.LIBRARY).write_bytes(library)
    return root / "backends"


def test_the_build_says_loudly_that_the_default_nmt_needs_sentencepiece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """An up-to-date build without sentencepiece still warns (nothing is compiled here)."""
    monkeypatch.setattr(ct2_backend, "sentencepiece_version", lambda: None)
    monkeypatch.setattr(ct2_backend, "up_to_date", lambda *_: True)
    settings = BuildSettings(out=tmp_path, work=tmp_path / ".work", archives=None)
    ct2_backend.build_ctranslate2(settings)
    err = capsys.readouterr().err
    assert err.startswith("WARNING: ctranslate2: built WITHOUT its text mode")
    for words in ("libsentencepiece-dev", "scripts/install-system-deps.sh", "--no-ct2-text"):
        assert words in err
    assert "python -m triton_kit.build_engines nmt) IS this backend's text mode" in err


def test_the_build_is_quiet_with_sentencepiece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(ct2_backend, "sentencepiece_version", lambda: "0.1.97")
    monkeypatch.setattr(ct2_backend, "up_to_date", lambda *_: True)
    settings = BuildSettings(out=tmp_path, work=tmp_path / ".work", archives=None)
    ct2_backend.build_ctranslate2(settings)
    assert "WARNING" not in capsys.readouterr().err


def test_text_mode_models_are_those_with_a_source_spm(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo", nmt=TEXT_CONFIG, nmt_ct2=IDS_CONFIG)
    assert ct2_text_models(repo) == ["nmt"]


def test_the_launcher_refuses_a_text_model_on_a_backend_without_the_text_mode(
    tmp_path: Path,
) -> None:
    repo = _repository(tmp_path / "repo", nmt=TEXT_CONFIG)
    backends = _backends(tmp_path, b"\x7fELF no text mode")
    config = ServerConfig(model_repository=repo, http_port=0, grpc_port=0, metrics_port=0)
    with pytest.raises(BackendUnavailableError) as caught:
        TritonServer(config)._check_backends(backends)
    (line,) = str(caught.value).splitlines()
    assert "built without its text mode" in line and "which nmt needs" in line
    assert "libsentencepiece-dev" in line and "--no-ct2-text" in line


def test_the_launcher_accepts_a_backend_with_the_text_mode_or_no_text_model(
    tmp_path: Path,
) -> None:
    with_text = _backends(tmp_path / "a", b"\x7fELF _ZN13" + ct2_backend.TEXT_MODE_SYMBOL)
    text = ServerConfig(model_repository=_repository(tmp_path / "r1", nmt=TEXT_CONFIG))
    TritonServer(text)._check_backends(with_text)
    without = _backends(tmp_path / "b", b"\x7fELF no text mode")
    ids = ServerConfig(model_repository=_repository(tmp_path / "r2", nmt_ct2=IDS_CONFIG))
    TritonServer(ids)._check_backends(without)


def test_the_built_backend_here_has_the_text_mode_where_sentencepiece_is_installed() -> None:
    from triton_kit.server.native_backends import NativeBackendError, built_library

    if ct2_backend.sentencepiece_version() is None:
        pytest.skip("no libsentencepiece-dev here")
    try:
        library = built_library(ct2_backend.CT2_BACKEND)
    except NativeBackendError as exc:
        pytest.skip(f"the ctranslate2 backend is not built: {exc}")
    assert ct2_backend.has_text_mode(library)


def _record(backends: Path, text_mode: bool | None) -> None:
    """The build's record beside the fake library; ``None``: one written before the record had
    ``text_mode`` (the field left out of the file)."""
    folder = backends / ct2_backend.CT2_BACKEND
    record = Provenance(
        ct2_backend.CT2_BACKEND, ct2_backend.LIBRARY, "ctranslate2", "0.1", False, "k", text_mode
    )
    fields = asdict(record)
    if text_mode is None:
        del fields["text_mode"]
    (folder / RECORD_NAME).write_text(json.dumps(fields))


def test_a_record_without_the_text_mode_refuses_even_where_the_library_scans_as_having_it(
    tmp_path: Path,
) -> None:
    repo = _repository(tmp_path / "repo", nmt=TEXT_CONFIG)
    backends = _backends(tmp_path, b"\x7fELF _ZN13" + ct2_backend.TEXT_MODE_SYMBOL)
    _record(backends, text_mode=False)
    config = ServerConfig(model_repository=repo, http_port=0, grpc_port=0, metrics_port=0)
    with pytest.raises(BackendUnavailableError, match="built without its text mode"):
        TritonServer(config)._check_backends(backends)


def test_a_record_with_the_text_mode_accepts(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo", nmt=TEXT_CONFIG)
    backends = _backends(tmp_path, b"\x7fELF no text mode")
    _record(backends, text_mode=True)
    TritonServer(ServerConfig(model_repository=repo))._check_backends(backends)


@pytest.mark.parametrize(("library", "refused"), [(b"\x7fELF no text mode", True), (None, False)])
def test_a_record_from_before_the_field_falls_back_to_scanning_the_library(
    tmp_path: Path, library: bytes | None, refused: bool
) -> None:
    repo = _repository(tmp_path / "repo", nmt=TEXT_CONFIG)
    with_symbol = b"\x7fELF _ZN13" + ct2_backend.TEXT_MODE_SYMBOL
    backends = _backends(tmp_path, library or with_symbol)
    _record(backends, text_mode=None)
    assert Provenance.read(backends / ct2_backend.CT2_BACKEND) is not None  # old records still read
    server = TritonServer(ServerConfig(model_repository=repo))
    if refused:
        with pytest.raises(BackendUnavailableError, match="built without its text mode"):
            server._check_backends(backends)
    else:
        server._check_backends(backends)


@pytest.mark.parametrize(("spm", "text_mode"), [("0.1.97", True), (None, False)])
def test_the_build_records_whether_it_has_the_text_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spm: str | None, text_mode: bool
) -> None:
    """Where the build is up to date but its record predates the field, the field is added."""
    monkeypatch.setattr(ct2_backend, "sentencepiece_version", lambda: spm)
    monkeypatch.setattr(ct2_backend, "up_to_date", lambda *_: True)
    _record(_backends(tmp_path, b"\x7fELF"), text_mode=None)
    settings = BuildSettings(out=tmp_path / "backends", work=tmp_path / ".work", archives=None)
    ct2_backend.build_ctranslate2(settings)
    record = Provenance.read(tmp_path / "backends" / ct2_backend.CT2_BACKEND)
    assert record is not None and record.text_mode is text_mode


def test_the_launchers_backend_folder_carries_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher checks the copy in its own backend folder, so the record goes with it."""
    from triton_kit.server import binary

    built = _backends(tmp_path / "built", b"\x7fELF") / ct2_backend.CT2_BACKEND
    _record(built.parent, text_mode=False)
    monkeypatch.setattr(binary, "built_library", lambda _: built / ct2_backend.LIBRARY)
    binary._add_native_backend(ct2_backend.CT2_BACKEND, tmp_path / "served")
    record = Provenance.read(tmp_path / "served")
    assert record is not None and record.text_mode is False
