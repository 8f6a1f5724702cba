"""Which Model Analyzer and perf_analyzer loadtest tune runs, and the server it hands them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from triton_kit.loadtest.tune import environment, options
from triton_kit.loadtest.tune.errors import TuneError


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\necho ok\n")
    path.chmod(0o755)
    return path


def test_an_installed_model_analyzer_is_used_as_given_and_nothing_is_installed(
    tmp_path: Path,
) -> None:
    given = _executable(tmp_path / "model-analyzer")
    venv = tmp_path / "venv"
    assert environment.model_analyzer(venv, given) == given
    assert not venv.exists()


def test_a_model_analyzer_that_is_not_an_executable_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "model-analyzer"
    with pytest.raises(TuneError, match=r"--model-analyzer .*not an executable"):
        environment.model_analyzer(tmp_path / "venv", missing)
    missing.write_text("")
    with pytest.raises(TuneError, match="not an executable"):
        environment.model_analyzer(tmp_path / "venv", missing)


def test_the_cli_reads_the_tools_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(options.PERF_ANALYZER_ENV, "/opt/pa/perf_analyzer")
    parsed = options.parse(["--slo-p99-ms", "50", "m"])
    assert parsed.perf_analyzer == Path("/opt/pa/perf_analyzer")
    assert parsed.model_analyzer is None
    given = options.parse(
        ["--slo-p99-ms", "50", "m", "--perf-analyzer", "pa", "--model-analyzer", "ma"]
    )
    assert (given.perf_analyzer, given.model_analyzer) == (Path("pa"), Path("ma"))
    monkeypatch.delenv(options.PERF_ANALYZER_ENV)
    assert options.parse(["--slo-p99-ms", "50"]).perf_analyzer.name == "perf_analyzer"


@pytest.mark.parametrize("visible", [None, "", "0,1"])
def test_the_server_wrapper_puts_the_callers_gpus_back(tmp_path: Path, visible: str | None) -> None:
    shown = _executable(tmp_path / "show")
    shown.write_text('#!/bin/sh\necho "${CUDA_VISIBLE_DEVICES-unset}" "$@"\n')
    wrapper = environment.server_wrapper(shown, tmp_path / "out" / "server.sh", visible)
    # Model Analyzer sets an empty list where DCGM found no GPU.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([str(wrapper), "--a", "b c"], env=env, capture_output=True, text=True)
    expected = "unset" if visible is None else visible
    assert done.stdout == f"{expected} --a b c\n"
