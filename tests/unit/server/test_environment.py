"""The environment the launcher hands tritonserver and its python stubs."""

from __future__ import annotations

import os
import sysconfig

import pytest

from triton_kit.server.binary import PROJECT_ROOT, TritonInstallation, server_environment


def test_explicit_pythonpath_outranks_site_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A carried numpy<2 on PYTHONPATH must shadow the interpreter's own for the stubs."""
    monkeypatch.setenv("PYTHONPATH", "/carried/site")
    env = server_environment(TritonInstallation(binary=PROJECT_ROOT, backends=PROJECT_ROOT))
    entries = env["PYTHONPATH"].split(os.pathsep)
    site = sysconfig.get_paths()["purelib"]
    assert entries[0] == str(PROJECT_ROOT)
    assert entries.index("/carried/site") < entries.index(site)


def test_stub_python_picks_the_stubs_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The stub takes sys.path from the python3 first on PATH; TRITON_KIT_STUB_PYTHON sets it."""
    monkeypatch.setenv("TRITON_KIT_STUB_PYTHON", str(tmp_path / "venv" / "bin" / "python3"))
    env = server_environment(TritonInstallation(binary=PROJECT_ROOT, backends=PROJECT_ROOT))
    assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "venv" / "bin")


def test_python_models_refuse_numpy_2_in_the_stub() -> None:
    """Under numpy 2 the 2.51 stub misreads tensors silently (H100 probe): refuse to load."""
    from triton_kit.python_models.common.base import require_numpy_1

    require_numpy_1("1.26.4")
    with pytest.raises(RuntimeError, match="numpy<2"):
        require_numpy_1("2.5.2")
