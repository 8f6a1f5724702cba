"""--apply changes exactly the tuned fields, and the build's writer keeps them on a rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines import tuned
from triton_kit.build_engines.repository import Tensor, onnx_model_config, render, write_model
from triton_kit.loadtest.tune import apply
from triton_kit.loadtest.tune.errors import TuneError

PATHS = ("instance_group", "dynamic_batching.max_queue_delay_microseconds")


def built_config() -> mc.ModelConfig:
    """A config as the build writes it: threads, parameters, dynamic batching, 1 instance."""
    config = onnx_model_config(
        "toy_model",
        [Tensor("x", "FP32", (4,))],
        [Tensor("y", "FP32", (4,))],
        max_batch_size=8,
        instances=1,
        threads=2,
        dynamic_batching_delay_us=0,
    )
    config.parameters["source"].string_value = "unit test"
    return config


def variant_of(config: mc.ModelConfig, tmp_path: Path) -> Path:
    """What Model Analyzer writes for a variant: the fields it set, and nothing else to take
    (a different max_batch_size and parameter here would show if apply took more)."""
    variant = mc.ModelConfig()
    variant.CopyFrom(config)
    del variant.instance_group[:]
    variant.instance_group.add(count=2, kind=mc.ModelInstanceGroup.KIND_CPU)
    variant.dynamic_batching.max_queue_delay_microseconds = 2000
    variant.max_batch_size = 4
    variant.parameters["source"].string_value = "model analyzer"
    path = tmp_path / "variants" / "toy_model_config_1" / "config.pbtxt"
    path.parent.mkdir(parents=True)
    path.write_text(render(variant))
    return path


def test_apply_changes_exactly_the_tuned_fields(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    model_dir = write_model(repo, built_config())
    original = (model_dir / "config.pbtxt").read_text()
    change = apply.plan(model_dir, variant_of(built_config(), tmp_path), PATHS, "run 1")
    changed = [
        line for line in change.diff.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"
    ]
    assert changed == [
        "-  count: 1",
        "+  count: 2",
        "+  max_queue_delay_microseconds: 2000",
    ]
    apply.write(change)
    after = text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())
    expected = text_format.Parse(original, mc.ModelConfig())
    expected.instance_group[0].count = 2
    expected.dynamic_batching.max_queue_delay_microseconds = 2000
    assert after == expected
    record = tuned.read(model_dir)
    assert record is not None and record.paths == PATHS and record.source == "run 1"


def test_a_rebuild_keeps_the_applied_fields_and_the_record(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    model_dir = write_model(repo, built_config())
    apply.write(apply.plan(model_dir, variant_of(built_config(), tmp_path), PATHS, "run 1"))
    applied = (model_dir / "config.pbtxt").read_text()

    rebuilt = built_config()
    rebuilt.parameters["source"].string_value = "rebuilt"  # the build's own change stays
    write_model(repo, rebuilt)
    config = text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())
    assert config.instance_group[0].count == 2
    assert config.dynamic_batching.max_queue_delay_microseconds == 2000
    assert config.max_batch_size == 8
    assert config.parameters["source"].string_value == "rebuilt"
    assert (model_dir / tuned.TUNED_FILE).is_file()
    write_model(repo, built_config())  # and again: the record survives every rebuild
    assert (model_dir / "config.pbtxt").read_text() == applied


def test_choosing_the_config_as_built_changes_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    model_dir = write_model(repo, built_config())
    same = tmp_path / "default.pbtxt"
    same.write_text(render(built_config()))
    assert apply.plan(model_dir, same, PATHS, "run 1").diff == ""


def _two_changes(tmp_path: Path) -> list[apply.Change]:
    """Two models with a planned change each, in a real repository folder."""
    changes = []
    for name in ("first_model", "second_model"):
        config = built_config()
        config.name = name
        model_dir = write_model(tmp_path / "repo", config)
        variant = variant_of(config, tmp_path / name)
        changes.append(apply.plan(model_dir, variant, PATHS, "run 1"))
    return changes


def test_a_failure_applying_the_second_model_leaves_none_applied(tmp_path: Path) -> None:
    changes = _two_changes(tmp_path)
    before = {c.model_dir: (c.model_dir / "config.pbtxt").read_bytes() for c in changes}
    # a real failure: the second model's tuned.json cannot be written (a folder is in its way)
    (changes[1].model_dir / tuned.TUNED_FILE).mkdir()
    with pytest.raises(TuneError, match="nothing applied"):
        apply.write_all(changes)
    for change in changes:
        assert (change.model_dir / "config.pbtxt").read_bytes() == before[change.model_dir]
    assert not (changes[0].model_dir / tuned.TUNED_FILE).exists()
    assert sorted(p.name for p in changes[0].model_dir.iterdir()) == ["1", "config.pbtxt"]


def test_write_all_applies_every_change(tmp_path: Path) -> None:
    changes = _two_changes(tmp_path)
    apply.write_all(changes)
    for change in changes:
        assert (change.model_dir / "config.pbtxt").read_text() == change.after
        assert tuned.read(change.model_dir) is not None
