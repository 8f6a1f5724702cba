"""The embedded server runs Triton's own onnxruntime and pytorch backends, never a stand-in."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from triton_kit.server import BackendUnavailableError, ServerConfig, TritonServer
from triton_kit.server.model_backends import model_backends
from triton_kit.server.native_backends import OUT_ENV

NATIVE = {"onnxruntime", "pytorch"}


def test_every_model_the_build_writes_is_served(
    triton_server: TritonServer, model_repository: Path
) -> None:
    """Every model in the repository loaded, the native ones included (the container
    would refuse what Triton's own backends refuse here)."""
    assert sorted(triton_server.model_names()) == sorted(model_backends(model_repository))


def test_native_models_are_served_by_the_native_library(
    triton_server: TritonServer, model_repository: Path
) -> None:
    """A Python-based backend reports ``runtime: model.py``; Triton's own reports none."""
    native = [m for m, b in model_backends(model_repository).items() if b in NATIVE]
    assert native, "the repository has no onnxruntime or pytorch model"
    for model in native:
        url = f"{triton_server.http_url}/v2/models/{model}/config"
        with urllib.request.urlopen(url, timeout=10) as response:
            config = json.load(response)
        assert config["backend"] in NATIVE, model
        assert config.get("runtime", "") in ("", f"libtriton_{config['backend']}.so"), model


def test_a_missing_native_backend_stops_the_start_with_one_line(
    tmp_path: Path, model_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUT_ENV, str(tmp_path / "nothing-built"))
    config = ServerConfig(
        model_repository=model_repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=tmp_path / "log",
    )
    with pytest.raises(BackendUnavailableError) as caught:
        TritonServer(config).start()
    lines = str(caught.value).splitlines()
    # onnxruntime, the default nmt's ctranslate2 and the default nmt_rnn's pytorch (its
    # TorchScript search, nmt_rnn_generate)
    assert len(lines) == 3, lines
    by_backend = {line.split("Triton's ", 1)[1].split(" ", 1)[0]: line for line in lines}
    assert set(by_backend) == {"ctranslate2", "onnxruntime", "pytorch"}
    assert all("backend is not built" in line and "make backends" in line for line in lines)
    assert "resnet50_model" in by_backend["onnxruntime"]
    assert "(needed by nmt)" in by_backend["ctranslate2"]  # the default nmt: its text mode
    assert "(needed by nmt_rnn_generate)" in by_backend["pytorch"]
    assert not (tmp_path / "log").exists(), "nothing may start"
