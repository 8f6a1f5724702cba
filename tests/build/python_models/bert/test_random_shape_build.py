"""A BERT build of a named shape with random weights says so loudly in every config it writes.
A real model build (bert-base, random weights), so it takes seconds."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
def test_random_shape_build_is_marked_loudly(tmp_path: Path) -> None:
    """bert-base with random weights: the warning is in the configs, the graph is bert-base."""
    from triton_kit.build_engines.cli import build_from_argv
    from triton_kit.build_engines.repository import parse

    repo, work = str(tmp_path / "repo"), str(tmp_path / "work")
    argv = ["bert", "--shape", "bert-base", "--max-length", "32", "--name", "bert_base"]
    build_from_argv([*argv, "--output-repository", repo, "--work-dir", work])
    config = parse((tmp_path / "repo" / "bert_base_model" / "config.pbtxt").read_text())
    assert config.parameters["random_weights"].string_value == "true"
    assert "RANDOM WEIGHTS" in config.parameters["WARNING"].string_value
    assert config.output[0].dims == [768]
    ensemble = parse((tmp_path / "repo" / "bert_base" / "config.pbtxt").read_text())
    assert "RANDOM WEIGHTS" in ensemble.parameters["WARNING"].string_value
    preprocess = parse((tmp_path / "repo" / "bert_base_preprocess" / "config.pbtxt").read_text())
    assert preprocess.parameters["buckets"].string_value == "16,32"
