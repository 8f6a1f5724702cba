"""``python -m triton_kit.build_engines <family> --dry-run`` writes nothing and loads no weights.

Each family's dry run is run in-process with the work dir, the repository and the current
directory in a temporary folder; afterwards every one of them must still be empty, and the
printed plan must name the files a real build would write. Weight loading is made to fail
(the dry run needs only the checkpoint's configuration), so a dry run that loads a model fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_kit.build_engines.cli import main


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _dry_run(tmp_path: Path, monkeypatch, capsys, family: str, *flags: str) -> str:
    cwd, work, repo = tmp_path / "cwd", tmp_path / "work", tmp_path / "repo"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    argv = [family, "--dry-run", "--work-dir", str(work), "--output-repository", str(repo)]
    assert main([*argv, *flags]) == 0
    assert _files(tmp_path) == [], "a dry run wrote files"
    return capsys.readouterr().out


def _no_weights(monkeypatch, target: str) -> None:
    """MOCK: loading weights raises, so a dry run that loads a model fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a dry run called {target}")

    module, _, name = target.rpartition(".")
    monkeypatch.setattr(f"{module}.{name}", refuse)


def test_bert_dry_run_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    _no_weights(monkeypatch, "transformers.AutoModel.from_pretrained")
    out = _dry_run(tmp_path, monkeypatch, capsys, "bert", "--engine", "tensorrt")
    repo, work = tmp_path / "repo", tmp_path / "work"
    assert f"dry run: {work / 'bert' / 'model.onnx'} is not exported" in out
    assert f"write {repo / 'bert_model' / '1' / 'model.plan'}" in out
    assert "10 optimisation profile(s)" in out  # one per bucket, named without the ONNX
    assert "profile 9 input_ids: min 1x225 opt 32x256 max 32x256" in out


def test_bert_dry_run_for_onnxruntime_names_the_files(tmp_path, monkeypatch, capsys) -> None:
    out = _dry_run(tmp_path, monkeypatch, capsys, "bert", "--precision", "fp16")
    served = tmp_path / "work" / "precision" / "bert_model" / "model.fp16.onnx"
    assert f"-> {served}" in out
    repo = tmp_path / "repo" / "bert_model"
    assert f"write {repo}/config.pbtxt (onnxruntime_onnx) and {repo}/1/model.onnx" in out


def test_nmt_dry_run_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    _no_weights(monkeypatch, "triton_kit.build_engines.families.nmt.export.load_model")
    _no_weights(monkeypatch, "triton_kit.build_engines.families.nmt.transformer.load_model")
    out = _dry_run(tmp_path, monkeypatch, capsys, "nmt", "--engine", "tensorrt")
    work, repo = tmp_path / "work" / "nmt", tmp_path / "repo"
    assert f"dry run: {work / 'encoder.onnx'} and {work / 'decoder.onnx'} are not exported" in out
    for model in ("nmt_encoder", "nmt_decoder"):
        assert f"=== plan of work for {model}: --precision fp32 --engine tensorrt ===" in out
        assert f"write {repo / model / '1' / 'model.plan'}" in out
    assert "profile 0 past_kv:" in out  # the decoder's cache axis, named without the ONNX


def test_dry_run_with_train_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["nmt", "--dry-run", "--train", "--work-dir", str(tmp_path / "w")]) == 1
    assert "train first" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["resnet50"])
def test_resnet50_dry_run_writes_nothing(tmp_path: Path, monkeypatch, capsys, family) -> None:
    out = _dry_run(tmp_path, monkeypatch, capsys, family, "--engine", "tensorrt")
    assert f"write {tmp_path / 'repo' / 'resnet50_model' / '1' / 'model.plan'}" in out


def test_nmt_rnn_default_dry_run_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    """The default: the TorchScript search, nmt_rnn and nmt_rnn_generate, no step models."""
    _no_weights(monkeypatch, "triton_kit.build_engines.families.nmt.rnn.model.load")
    out = _dry_run(tmp_path, monkeypatch, capsys, "nmt", "--architecture", "rnn")
    assert "nothing scripted or written for nmt_rnn and nmt_rnn_generate" in out
    assert "plan of work for nmt_rnn_encoder" not in out


def test_nmt_rnn_python_search_dry_run_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    _no_weights(monkeypatch, "triton_kit.build_engines.families.nmt.rnn.model.load")
    flags = ("--architecture", "rnn", "--engine", "onnxruntime", "--search", "python")
    out = _dry_run(tmp_path, monkeypatch, capsys, "nmt", *flags)
    repo = tmp_path / "repo"
    for model in ("nmt_rnn_encoder", "nmt_rnn_decoder"):
        assert f"=== plan of work for {model}: --precision fp32 --engine onnxruntime ===" in out
        assert f"write {repo / model}/config.pbtxt (onnxruntime_onnx)" in out
