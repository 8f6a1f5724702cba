"""The harness's tiny model: one writer of a python model, and the doubler the launcher row's
--tiny and the server tests serve."""

from __future__ import annotations

from pathlib import Path

from triton_kit.benchmarks import launcher
from triton_kit.benchmarks.harness.tiny_model import DOUBLER_MODEL, doubler_config, write_doubler


def test_write_doubler_writes_its_config_and_model(tmp_path: Path) -> None:
    folder = write_doubler(tmp_path, "double")
    assert folder == tmp_path / "double"
    assert (folder / "1" / "model.py").read_text() == DOUBLER_MODEL
    config = (folder / "config.pbtxt").read_text()
    assert config == doubler_config("double")
    assert 'name: "double"' in config and "dynamic_batching { }" in config


def test_the_launcher_rows_tiny_model_is_the_doubler_with_its_scheduling(tmp_path: Path) -> None:
    assert launcher.write_tiny(tmp_path) == tmp_path
    config = (tmp_path / "tiny" / "config.pbtxt").read_text()
    assert 'name: "tiny"' in config and "max_batch_size: 64" in config
    assert "dynamic_batching { max_queue_delay_microseconds: 100 }" in config
    assert (tmp_path / "tiny" / "1" / "model.py").read_text() == DOUBLER_MODEL
