"""The AOTInductor benchmark's pieces that need no GPU: the served config and the options."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from triton_kit.benchmarks.gpu import aoti


def _parsed(text: str) -> model_config_pb2.ModelConfig:
    config = model_config_pb2.ModelConfig()
    text_format.Parse(text, config)  # unknown fields fail: Triton would refuse them too
    return config


def test_gpu_config_serves_the_package_through_the_renamed_backend() -> None:
    config = _parsed(aoti.aoti_config("aoti_i2", 2, gpu=True))
    assert (config.backend, config.platform) == ("pytorch_aoti", "torch_aoti")
    assert config.max_batch_size == 256
    assert [(g.kind, g.count, list(g.gpus)) for g in config.instance_group] == [
        (model_config_pb2.ModelInstanceGroup.KIND_GPU, 2, [0])
    ]
    assert list(config.dynamic_batching.preferred_batch_size) == list(aoti.PREFERRED)
    assert config.dynamic_batching.max_queue_delay_microseconds == 2000
    # Pinned output stays on (Triton's default): the crash was the unbatched responder, not it.
    assert not config.HasField("optimization")
    assert [i.name for i in config.input] == ["INPUT__0"]
    assert [o.name for o in config.output] == ["OUTPUT__0"]


def test_cpu_config_has_no_gpu_list() -> None:
    (group,) = _parsed(aoti.aoti_config("aoti_i1", 1, gpu=False)).instance_group
    assert group.kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert list(group.gpus) == []


def test_backend_and_compiler_default_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRITON_KIT_AOTI_BACKEND", "/b/libtriton_pytorch_aoti.so")
    monkeypatch.setenv("TRITON_KIT_AOTI_CXX", "/usr/bin/g++")
    options = aoti.parse(["--out", str(tmp_path)])
    assert options.backend_lib == Path("/b/libtriton_pytorch_aoti.so")
    assert options.cxx == "/usr/bin/g++"
    assert options.instances == (1, 2, 4)
    assert options.settings.device == "cuda" and options.concurrency == 256


def test_smoke_runs_on_cpu_with_two_clients(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path), "--smoke", "--instances", "1"])
    assert options.settings.device == "cpu"
    assert options.concurrency == 2
    assert options.instances == (1,)


def test_shared_memory_loads_default_to_all_three_and_refuse_unknown_kinds(tmp_path: Path) -> None:
    assert aoti.parse(["--out", str(tmp_path)]).shared_memory == ("none", "system", "cuda")
    assert aoti.parse(["--out", str(tmp_path), "--shared-memory", "cuda"]).shared_memory == (
        "cuda",
    )
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--shared-memory", "nvlink"])


def test_batch_one_config_does_not_wait() -> None:
    batching = _parsed(aoti.aoti_config("aoti_i1_d0", 1, gpu=True, delay_us=0)).dynamic_batching
    assert batching.max_queue_delay_microseconds == 0
    assert list(batching.preferred_batch_size) == []


def test_each_delay_is_served_at_every_instance_count_and_the_baseline_can_stay_out(
    tmp_path: Path,
) -> None:
    options = aoti.parse(
        ["--out", str(tmp_path), "--instances", "3,4", "--delays", "1000,4000", "--no-baseline"]
    )
    assert options.delays_us == (1000, 4000) and not options.baseline
    package = tmp_path / "resnet50.pt2"
    package.write_bytes(b"package")
    repo = tmp_path / "repo"
    names = aoti.write_repository(repo, package, Path(), options.settings, options)
    assert names == [
        "aoti_i1_d0", "aoti_i3_d1000p", "aoti_i4_d1000p", "aoti_i3_d4000p", "aoti_i4_d4000p"
    ]  # fmt: skip
    config = _parsed((repo / "aoti_i4_d4000p" / "config.pbtxt").read_text())
    assert config.dynamic_batching.max_queue_delay_microseconds == 4000
    assert config.instance_group[0].count == 4
    assert (repo / "aoti_i1_d0" / "1" / "model.pt2").read_bytes() == b"package"


def test_delays_default_to_2000_and_refuse_zero(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path)])
    assert options.delays_us == (2000,) and options.baseline
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--delays", "0"])
