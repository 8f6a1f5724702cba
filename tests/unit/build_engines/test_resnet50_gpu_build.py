"""The ResNet-50 repository a GPU build writes (issue 30), produced on this CPU machine.

Only what needs CUDA is faked: ``torch.cuda.is_available()`` (``gpu_visible``), scripting the
module onto the device and the TorchScript-vs-ONNX parity check. Options come from the real
command-line parser; the family's ``write_repository`` and the torch engine's
``torch_artifacts``/``torch_config`` run as they do on the H100.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.cli import build_parser, family_options
from triton_kit.build_engines.families import resnet50
from triton_kit.build_engines.flags import parse_build_args

RESNET_MODELS = (
    "resnet50",
    "resnet50_uint8",
    "resnet50_preprocess",
    "resnet50_uint8_preprocess",
    "resnet50_model",
    "resnet50_postprocess",
)


def _fake_torch_host(monkeypatch: pytest.MonkeyPatch, gpu: bool) -> None:
    from triton_kit.build_engines.engines.torchscript import artifacts, script

    def script_module(module, example, path, precision, device):
        assert device == ("cuda" if gpu else "cpu")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"stand-in TorchScript")
        return Path(path)

    monkeypatch.setattr(script, "gpu_visible", lambda: gpu)
    monkeypatch.setattr(artifacts, "gpu_visible", lambda: gpu)
    monkeypatch.setattr(artifacts, "script_module", script_module)
    monkeypatch.setattr(artifacts, "check_parity", lambda *args: {"logits": 0.0})


def _build(tmp_path: Path, *flags: str) -> dict[str, mc.ModelConfig]:
    """``python -m triton_kit.build_engines resnet50 FLAGS``'s repository-writing step."""
    repo, work = tmp_path / "repo", tmp_path / "work"
    argv = ["resnet50", *flags, "--output-repository", str(repo), "--work-dir", str(work)]
    args = parse_build_args(build_parser(), argv)
    onnx_path = tmp_path / "model.onnx"
    onnx_path.write_bytes(b"stand-in ONNX")
    source = resnet50.Source(object(), "stand-in ResNet-50", random_weights=False)
    resnet50.write_repository(
        family_options("resnet50", args), resnet50.options_from(args), source, onnx_path, {}
    )
    return {
        path.parent.name: text_format.Parse(path.read_text(), mc.ModelConfig())
        for path in sorted(repo.glob("*/config.pbtxt"))
    }


def _built_chain(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpu: bool, max_batch: int, *flags: str
) -> mc.ModelConfig:
    """Build with ``--engine torch FLAGS``; every model of both chains has ``max_batch``, and
    Triton accepts the ensembles (it refuses one whose max_batch_size exceeds any step's).
    Returns resnet50_model's config."""
    _fake_torch_host(monkeypatch, gpu)
    configs = _build(tmp_path, "--engine", "torch", *flags)
    assert {name: configs[name].max_batch_size for name in RESNET_MODELS} == dict.fromkeys(
        RESNET_MODELS, max_batch
    )
    ensembles = [c for c in configs.values() if c.platform == "ensemble"]
    assert {c.name for c in ensembles} == {"resnet50", "resnet50_uint8"}
    for ensemble in ensembles:
        for step in ensemble.ensemble_scheduling.step:
            inner = configs[step.model_name]
            assert ensemble.max_batch_size <= inner.max_batch_size, (
                f"{ensemble.name} max_batch_size {ensemble.max_batch_size} exceeds "
                f"{step.model_name}'s {inner.max_batch_size}"
            )
    return configs["resnet50_model"]


def test_default_gpu_build_writes_the_configuration_measured_on_the_h100(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """benchmarks/results/tune_gpu.md (loadtest tune on the H100): max batch 256, 2 GPU
    instances, no queue delay, preferred 64/128/256; the ensembles and their python steps take
    the same 256."""
    model = _built_chain(monkeypatch, tmp_path, True, 256)
    assert model.platform == "pytorch_libtorch"
    assert [(g.count, g.kind) for g in model.instance_group] == [
        (2, mc.ModelInstanceGroup.KIND_GPU)
    ]
    assert model.dynamic_batching.max_queue_delay_microseconds == 0
    assert list(model.dynamic_batching.preferred_batch_size) == [64, 128, 256]


def _fake_aoti_gpu_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU host for ``--engine aoti``: compiling and loading the package are stand-ins."""
    import torch

    from triton_kit.build_engines.engines.aoti import build

    def compile_package(module, example, path, **kwargs):
        assert kwargs["device"] == "cuda"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"stand-in package")
        return Path(path)

    _fake_torch_host(monkeypatch, True)
    monkeypatch.setattr(build, "gpu_visible", lambda: True)
    monkeypatch.setattr(build, "compile_package", compile_package)
    monkeypatch.setattr(torch._inductor, "aoti_load_package", lambda path: object())
    monkeypatch.setattr(build, "worst_parity", lambda *args: 0.0)


def test_aoti_gpu_build_writes_what_served_the_package_best_on_the_h100(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The AOTInductor package through pytorch_aoti (one runner per instance): 4 GPU
    instances at 2000 us with preferred 64/128/256 served 0.71-0.88x in process against
    0.61-0.74x for 2 instances (benchmarks/results/gpu_aoti/call22-resnet50-runners.md and
    call25-resnet50-unpinned.md); tune's 2 instances without delay were TorchScript's."""
    _fake_aoti_gpu_host(monkeypatch)
    model = _build(tmp_path, "--engine", "aoti")["resnet50_model"]
    assert (model.backend, model.platform, model.max_batch_size) == (
        "pytorch_aoti",
        "torch_aoti",
        256,
    )
    assert [(g.count, g.kind) for g in model.instance_group] == [
        (4, mc.ModelInstanceGroup.KIND_GPU)
    ]
    assert model.dynamic_batching.max_queue_delay_microseconds == 2000
    assert list(model.dynamic_batching.preferred_batch_size) == [64, 128, 256]


@pytest.mark.parametrize("delay", [0, 4000])
def test_a_queue_delay_given_on_a_gpu_build_changes_only_the_delay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, delay: int
) -> None:
    """``--queue-delay-us N`` on a native GPU build: that delay, with the instances and
    preferred sizes measured there. Before, a delay other than 0 dropped both (one instance,
    no preferred sizes: without them 2 or 4 instances served 0.60-0.62x of the package in process
    against 0.89-0.91x with them on the H200, benchmarks/results/gpu/issue30-goals/session46/
    notes.md), and an explicit 0 was taken for "not given" and became the AOTInductor build's
    2000 us."""
    _fake_aoti_gpu_host(monkeypatch)
    model = _build(tmp_path, "--engine", "aoti", "--queue-delay-us", str(delay))["resnet50_model"]
    assert [(g.count, g.kind) for g in model.instance_group] == [
        (4, mc.ModelInstanceGroup.KIND_GPU)
    ]
    assert model.dynamic_batching.max_queue_delay_microseconds == delay
    assert list(model.dynamic_batching.preferred_batch_size) == [64, 128, 256]


def _pre_post_instances(configs: dict[str, mc.ModelConfig]) -> dict[str, list[tuple[int, int]]]:
    names = ("resnet50_preprocess", "resnet50_uint8_preprocess", "resnet50_postprocess")
    return {name: [(g.count, g.kind) for g in configs[name].instance_group] for name in names}


def test_a_native_gpu_build_runs_two_instances_of_each_pre_processor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On the H100 one resnet50_preprocess instance was busy 104% and capped the ensemble:
    a native GPU build gives both pre-processors GPU_PREPROCESS_INSTANCES (2) GPU instances;
    with them the JPEG ensemble served 2,030 img/s and top-k (one CPU instance, every request of
    an execute in one call) was busy 117% (gpu_pipelines.md, call 16), so it gets two CPU
    instances there too."""
    gpu, cpu = mc.ModelInstanceGroup.KIND_GPU, mc.ModelInstanceGroup.KIND_CPU
    for build in ("gpu", "graphs", "cpu"):
        (tmp_path / build).mkdir()
    _fake_torch_host(monkeypatch, True)
    assert resnet50.GPU_PREPROCESS_INSTANCES == 2
    assert _pre_post_instances(_build(tmp_path / "gpu", "--engine", "torch")) == {
        "resnet50_preprocess": [(2, gpu)],
        "resnet50_uint8_preprocess": [(2, gpu)],
        "resnet50_postprocess": [(2, cpu)],
    }
    graphs = _build(tmp_path / "graphs", "--engine", "torch", "--cuda-graphs")
    assert _pre_post_instances(graphs)["resnet50_preprocess"] == [(1, gpu)]  # --instances
    _fake_torch_host(monkeypatch, False)
    on_cpu = _pre_post_instances(_build(tmp_path / "cpu", "--engine", "torch"))
    assert set(map(tuple, on_cpu.values())) == {((1, cpu),)}


def test_explicit_max_batch_size_wins_on_a_gpu_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--max-batch-size 128``: every model takes it; preferred sizes above it are dropped."""
    model = _built_chain(monkeypatch, tmp_path, True, 128, "--max-batch-size", "128")
    assert list(model.dynamic_batching.preferred_batch_size) == [64, 128]
    assert model.dynamic_batching.max_queue_delay_microseconds == 0


def test_cpu_torch_build_keeps_the_cpu_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No GPU visible: max batch 16, CPU instances, no GPU batching."""
    model = _built_chain(monkeypatch, tmp_path, False, resnet50.DEFAULT_MAX_BATCH)
    assert {g.kind for g in model.instance_group} == {mc.ModelInstanceGroup.KIND_CPU}
    assert not model.dynamic_batching.preferred_batch_size


def test_gpu_build_with_cuda_graphs_keeps_the_cpu_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--cuda-graphs`` serves a python model with one graph per batch bucket, not what
    was measured: it keeps max batch 16 (buckets 1..16) and no GPU batching defaults."""
    model = _built_chain(monkeypatch, tmp_path, True, resnet50.DEFAULT_MAX_BATCH, "--cuda-graphs")
    assert model.backend == "python"
    assert [s.batch_size for s in model.optimization.cuda.graph_spec] == [1, 2, 4, 8, 16]


@pytest.mark.parametrize(("flags", "expected"), [((), "false"), (("--pixels-on-device",), "true")])
def test_pixels_on_device_is_a_pre_processor_parameter_off_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: tuple[str, ...], expected: str
) -> None:
    """``--pixels-on-device`` writes ``pixels_on_device: true`` into both pre-processors (their
    torch path then hands PIXELS out through DLPack); without it they say false."""
    _fake_torch_host(monkeypatch, True)
    configs = _build(tmp_path, "--engine", "torch", *flags)
    for name in ("resnet50_preprocess", "resnet50_uint8_preprocess"):
        assert configs[name].parameters["pixels_on_device"].string_value == expected


def test_a_negative_queue_delay_is_refused_naming_the_flag(capsys: pytest.CaptureFixture) -> None:
    """Triton would refuse the config at load; the build refuses the flag first."""
    with pytest.raises(SystemExit) as stopped:
        parse_build_args(build_parser(), ["resnet50", "--queue-delay-us", "-5"])
    assert stopped.value.code == 2
    assert "--queue-delay-us: -5 is negative" in capsys.readouterr().err
