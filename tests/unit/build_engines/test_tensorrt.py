"""TensorRT plans: everything that needs no TensorRT is tested for real here.

Profiles from each family's ONNX signature, trtexec command lines, the
tensorrt_plan config (parsed with Triton's schema), sidecars and the launcher's
refusal of mismatched plans, and the clear failure where TensorRT is absent.
Real builds are marked ``tensorrt``/``gpu`` and skip with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import onnx
import pytest
from google.protobuf import text_format
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines import serving
from triton_kit.build_engines.engines.tensorrt.config import tensorrt_plan_config
from triton_kit.build_engines.engines.tensorrt.lazy import (
    TensorRTUnavailable,
    import_tensorrt,
    tensorrt_available,
)
from triton_kit.build_engines.engines.tensorrt.options import TensorRTOptions
from triton_kit.build_engines.engines.tensorrt.profiles import (
    DimRange,
    ProfileError,
    derive_profiles,
    onnx_inputs,
    parse_shape_ranges,
    ranges_for,
)
from triton_kit.build_engines.engines.tensorrt.trtexec import reproduce_script, trtexec_command
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import (
    Tensor,
    onnx_model_config,
    set_parameters,
    write_model,
)
from triton_kit.python_models.common.tensorrt_sidecar import Sidecar
from triton_kit.server.errors import PlanMismatchError, ServerError
from triton_kit.server.plan_check import check_plans, find_problems
from triton_kit.server.tensorrt_device import Gpu, TensorRTRuntime, parse_nvidia_smi, release

HAS_TENSORRT = tensorrt_available()
HAS_GPU = shutil.which("nvidia-smi") is not None

# -- each family's ONNX signature, as its exporter writes it -----------------------------


def _onnx(path: Path, inputs: dict[str, tuple[int, list]], output: str = "out") -> Path:
    """A graph with the given inputs (elem type, dims: int or axis name) and one output."""
    values = [helper.make_tensor_value_info(n, t, dims) for n, (t, dims) in inputs.items()]
    first = next(iter(inputs))
    node = helper.make_node("Identity", [first], [output])
    out = helper.make_tensor_value_info(output, inputs[first][0], inputs[first][1])
    graph = helper.make_graph([node], "g", values, [out])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


FAMILY_SPECS = {
    "resnet50_model": {"pixel_values": (TensorProto.FLOAT, ["batch", 3, 224, 224])},
    "bert_model": {
        "input_ids": (TensorProto.INT64, ["batch", "sequence"]),
        "attention_mask": (TensorProto.INT64, ["batch", "sequence"]),
    },
    "nmt_encoder": {
        "input_ids": (TensorProto.INT64, ["batch", "src_len"]),
        "attention_mask": (TensorProto.INT64, ["batch", "src_len"]),
    },
    "nmt_decoder": {
        "input_ids": (TensorProto.INT64, ["rows", 1]),
        "encoder_attention_mask": (TensorProto.INT64, ["rows", "src_len"]),
        "cross_kv": (TensorProto.FLOAT, [3, 2, "rows", 4, "src_len", 32]),
        "past_kv": (TensorProto.FLOAT, [3, 2, "past_rows", 4, "past_len", 32]),
        "beam_index": (TensorProto.INT64, ["rows"]),
    },
}


def _config(name: str) -> mc.ModelConfig:
    if name == "resnet50_model":
        return onnx_model_config(
            name,
            [Tensor("pixel_values", "FP32", (3, 224, 224))],
            [Tensor("logits", "FP32", (1000,))],
            16,
            threads=2,
            dynamic_batching_delay_us=2000,
        )
    if name == "bert_model":
        tokens = [Tensor("input_ids", "INT64", (-1,)), Tensor("attention_mask", "INT64", (-1,))]
        config = onnx_model_config(name, tokens, [Tensor("EMBEDDING", "FP32", (384,))], 8)
        set_parameters(config, {"buckets": "16,32,64,128", "max_length": 128})
        return config
    if name == "nmt_encoder":
        tokens = [
            Tensor("input_ids", "INT64", (-1, -1)),
            Tensor("attention_mask", "INT64", (-1, -1)),
        ]
        config = onnx_model_config(
            name, tokens, [Tensor("cross_kv", "FP32", (3, 2, -1, 4, -1, 32))], 0
        )
    else:
        config = onnx_model_config(
            name,
            [
                Tensor("input_ids", "INT64", (-1, 1)),
                Tensor("encoder_attention_mask", "INT64", (-1, -1)),
                Tensor("cross_kv", "FP32", (3, 2, -1, 4, -1, 32)),
                Tensor("past_kv", "FP32", (3, 2, -1, 4, -1, 32)),
                Tensor("beam_index", "INT64", (-1,)),
            ],
            [
                Tensor("logits", "FP32", (-1, 80)),
                Tensor("present_kv", "FP32", (3, 2, -1, 4, -1, 32)),
            ],
            0,
        )
    set_parameters(config, {"max_source_length": 48, "max_target_length": 40, "num_beams": 4})
    return config


@pytest.fixture
def family_onnx(tmp_path: Path):
    def make(name: str) -> Path:
        return _onnx(tmp_path / f"{name}.onnx", FAMILY_SPECS[name])

    return make


def _family(name: str) -> str:
    return name.split("_")[0]


def _profiles(name: str, path: Path, overrides: dict | None = None):
    config = _config(name)
    return derive_profiles(
        onnx_inputs(path), config.max_batch_size, ranges_for(_family(name), config, overrides)
    )


# -- profiles ---------------------------------------------------------------------------


def test_resnet50_one_profile_over_the_batch(family_onnx) -> None:
    (profile,) = _profiles("resnet50_model", family_onnx("resnet50_model"))
    shapes = profile.as_dict()["pixel_values"]
    assert (shapes.min, shapes.opt, shapes.max) == (
        (1, 3, 224, 224),
        (16, 3, 224, 224),
        (16, 3, 224, 224),
    )


def test_bert_one_profile_per_sequence_bucket(family_onnx) -> None:
    profiles = _profiles("bert_model", family_onnx("bert_model"))
    assert len(profiles) == 4
    seq = [(p.as_dict()["input_ids"].min[1], p.as_dict()["input_ids"].max[1]) for p in profiles]
    assert seq == [(1, 16), (17, 32), (33, 64), (65, 128)]
    for profile in profiles:  # both token inputs share the sequence axis within a profile
        shapes = profile.as_dict()
        assert shapes["input_ids"] == shapes["attention_mask"]
        assert (
            shapes["input_ids"].max[0] == 8
            and shapes["input_ids"].opt[1] == shapes["input_ids"].max[1]
        )


def test_nmt_decoder_profile_covers_the_kv_cache(family_onnx) -> None:
    (profile,) = _profiles("nmt_decoder", family_onnx("nmt_decoder"))
    shapes = profile.as_dict()
    past = shapes["past_kv"]
    assert past.min == (3, 2, 1, 4, 0, 32)  # the first step has an empty cache
    assert past.max == (3, 2, 32, 4, 40, 32)  # rows = batch 8 x 4 beams; up to the target limit
    assert shapes["cross_kv"].max[4] == 48 and shapes["encoder_attention_mask"].max == (32, 48)
    assert shapes["input_ids"].max == (32, 1)
    assert shapes["beam_index"].min == (1,) and shapes["beam_index"].max == (32,)


def test_nmt_encoder_profile(family_onnx) -> None:
    (profile,) = _profiles("nmt_encoder", family_onnx("nmt_encoder"))
    ids = profile.as_dict()["input_ids"]
    assert (ids.min, ids.max) == ((1, 1), (8, 48))


def test_missing_axis_range_names_the_axis_and_the_flag(tmp_path: Path) -> None:
    path = _onnx(tmp_path / "m.onnx", {"x": (TensorProto.FLOAT, ["batch", "mystery"])})
    with pytest.raises(ProfileError, match=r"'mystery' \(axis 1 of input 'x'\).*--shape-range"):
        derive_profiles(onnx_inputs(path), 4, {})


def test_shape_range_overrides(family_onnx) -> None:
    overrides = parse_shape_ranges(["sequence=1:100:256,257:384:512"])
    profiles = _profiles("bert_model", family_onnx("bert_model"), overrides)
    assert [p.as_dict()["input_ids"].max[1] for p in profiles] == [256, 512]
    with pytest.raises(ValueError):
        parse_shape_ranges(["sequence"])
    with pytest.raises(ValueError):
        DimRange.parse("8:4:16")


# -- trtexec and dry runs for each family ------------------------------------------------


def test_trtexec_command_maps_every_option(family_onnx) -> None:
    options = TensorRTOptions(
        workspace_gb=2,
        builder_optimization_level=5,
        sparsity=True,
        version_compatible=True,
        hardware_compatibility_level="ampere+",
        timing_cache=Path("build/tensorrt/timing.cache"),
    )
    profiles = _profiles("resnet50_model", family_onnx("resnet50_model"))
    command = trtexec_command(Path("m.onnx"), Path("m.plan"), profiles, options)
    assert command[:4] == ["trtexec", "--onnx=m.onnx", "--saveEngine=m.plan", "--stronglyTyped"]
    for flag in (
        "--minShapes=pixel_values:1x3x224x224",
        "--optShapes=pixel_values:16x3x224x224",
        "--maxShapes=pixel_values:16x3x224x224",
        "--memPoolSize=workspace:2048M",
        "--builderOptimizationLevel=5",
        "--sparsity=enable",
        "--versionCompatible",
        "--hardwareCompatibilityLevel=ampere+",
        "--timingCacheFile=build/tensorrt/timing.cache",
    ):
        assert flag in command
    assert not {"--fp16", "--int8", "--best"} & set(command)  # precision lives in the ONNX
    dla = trtexec_command(Path("m.onnx"), Path("m.plan"), profiles, TensorRTOptions(dla_core=1))
    assert "--useDLACore=1" in dla and "--allowGPUFallback" in dla


def test_one_shape_triple_per_profile(family_onnx) -> None:
    profiles = _profiles("bert_model", family_onnx("bert_model"))
    command = trtexec_command(Path("m.onnx"), Path("m.plan"), profiles, TensorRTOptions())
    mins = [c for c in command if c.startswith("--minShapes=")]
    assert mins[1] == "--minShapes=input_ids:1x17,attention_mask:1x17"
    assert len(mins) == len([c for c in command if c.startswith("--maxShapes=")]) == 4


def _args(tmp_path: Path, **extra: object) -> BuildOptions:
    """Build options as a family gets them; TensorRTOptions fields may be given flat."""
    tensorrt = {k: extra.pop(k) for k in list(extra) if k in TensorRTOptions.__dataclass_fields__}
    values = {
        "precision": "int8",
        "engine": "tensorrt",
        "dry_run": True,
        "work_dir": tmp_path / "build",
        "output_repository": tmp_path / "repo",
        "instances": 2,
        "threads": 1,
    }
    values.update(extra)
    return BuildOptions(**values, tensorrt=TensorRTOptions(**tensorrt))


@pytest.mark.parametrize("name", list(FAMILY_SPECS))
def test_dry_run_prints_plan_and_trtexec_and_writes_nothing(
    name: str, family_onnx, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = family_onnx(name)
    args = _args(tmp_path, family=_family(name))
    with pytest.raises(serving.DryRun):
        serving.serving_artifacts(name, path, _config(name), args, calibration=lambda: [])
    out = capsys.readouterr().out
    assert f"plan of work for {name}: --precision int8 --engine tensorrt" in out
    assert "calibration: minmax on 32 samples" in out
    assert 'platform: "tensorrt_plan"' in out and "kind: KIND_GPU" in out
    lowered = tmp_path / "build" / "precision" / name / "model.int8.onnx"
    assert f"trtexec \\\n    --onnx={lowered}" in out
    assert f"--saveEngine={tmp_path / 'repo' / name / '1' / 'model.plan'}" in out
    for spec_input in FAMILY_SPECS[name]:
        assert f"--minShapes={spec_input}:" in out or f",{spec_input}:" in out
    assert (
        f"kit command: python -m triton_kit.build_engines {_family(name)} --engine tensorrt" in out
    )
    assert not (tmp_path / "build").exists() and not (tmp_path / "repo").exists()


def test_dry_run_before_export_uses_the_config(tmp_path: Path, capsys) -> None:
    """A family may dry-run before exporting: profiles then come from the config's dims."""
    args = _args(tmp_path, family="resnet50", precision="fp16")
    with pytest.raises(serving.DryRun):
        serving.serving_artifacts(
            "resnet50_model", tmp_path / "absent.onnx", _config("resnet50_model"), args
        )
    assert "--maxShapes=pixel_values:16x3x224x224" in capsys.readouterr().out


# -- tensorrt_plan config ---------------------------------------------------------------


def test_plan_config_parses_with_tritons_schema(family_onnx) -> None:
    profiles = _profiles("bert_model", family_onnx("bert_model"))
    options = TensorRTOptions(cuda_graphs=True, gather_kernel_buffer_threshold=4, warmup=True)
    onnx_config = _config("bert_model")
    plan = tensorrt_plan_config(onnx_config, profiles, options, instances=2)
    parsed = text_format.Parse(text_format.MessageToString(plan), mc.ModelConfig())
    assert parsed.platform == "tensorrt_plan" and parsed.default_model_filename == "model.plan"
    assert parsed.max_batch_size == 8
    assert [t.name for t in parsed.input] == ["input_ids", "attention_mask"]
    assert list(parsed.input[0].dims) == [-1] and parsed.output[0].name == "EMBEDDING"
    (group,) = parsed.instance_group
    assert group.kind == mc.ModelInstanceGroup.KIND_GPU and group.count == 2
    assert list(group.profile) == ["0", "1", "2", "3"]
    assert (
        parsed.optimization.cuda.graphs and parsed.optimization.gather_kernel_buffer_threshold == 4
    )
    assert "intra_op_thread_count" not in parsed.parameters
    assert parsed.parameters["buckets"].string_value == "16,32,64,128"
    # one warmup per profile (tests/unit/build_engines/test_tensorrt_defects.py)
    warmup = parsed.model_warmup[0]
    assert len(parsed.model_warmup) == 4
    assert warmup.batch_size == 8 and list(warmup.inputs["input_ids"].dims) == [16]
    assert warmup.inputs["input_ids"].zero_data
    assert onnx_config.platform == "onnxruntime_onnx"  # the source config is left alone


def test_plan_config_without_batching_keeps_full_dims(family_onnx) -> None:
    profiles = _profiles("nmt_decoder", family_onnx("nmt_decoder"))
    plan = tensorrt_plan_config(_config("nmt_decoder"), profiles, TensorRTOptions(warmup=True))
    assert plan.max_batch_size == 0 and not plan.optimization.cuda.graphs
    assert list(plan.model_warmup[0].inputs["past_kv"].dims) == [3, 2, 8, 4, 16, 32]


# -- sidecar and the launcher's check ---------------------------------------------------


def _sidecar(**changes: object) -> Sidecar:
    values = {
        "model": "resnet50_model",
        "family": "resnet50",
        "tensorrt_version": "10.5.0",
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "precision": "int8",
        "onnx_sha256": "0" * 64,
        "profiles": [],
        "build_options": TensorRTOptions().as_record(),
        "rebuild_command": (
            "python -m triton_kit.build_engines resnet50 --engine tensorrt --precision int8"
        ),
    }
    values.update(changes)
    return Sidecar(**values)


def _plan_repository(tmp_path: Path, sidecar: Sidecar | None, family_onnx) -> Path:
    repo = tmp_path / "repo"
    profiles = _profiles("resnet50_model", family_onnx("resnet50_model"))
    config = tensorrt_plan_config(_config("resnet50_model"), profiles, TensorRTOptions())
    files: dict[str, bytes | str] = {"model.plan": b"plan"}
    if sidecar is not None:
        files["model.plan.json"] = sidecar.to_json()
    write_model(repo, config, files)
    write_model(repo, _config("bert_model"), {"model.onnx": b"onnx"})  # not a plan: ignored
    return repo


H100 = [Gpu("NVIDIA H100 80GB HBM3", "9.0")]
TRT_10_5 = TensorRTRuntime("10.5.0", "test")


def test_matching_plan_is_accepted(tmp_path: Path, family_onnx) -> None:
    repo = _plan_repository(tmp_path, _sidecar(), family_onnx)
    check_plans(repo, TRT_10_5, H100)


def test_other_tensorrt_version_is_refused_with_the_rebuild_command(tmp_path, family_onnx) -> None:
    repo = _plan_repository(tmp_path, _sidecar(), family_onnx)
    with pytest.raises(PlanMismatchError) as caught:
        check_plans(repo, TensorRTRuntime("10.7.0", "libnvinfer.so.10"), H100)
    message = str(caught.value)
    assert "model 'resnet50_model' version 1" in message
    assert "built with TensorRT 10.5.0, but this server has TensorRT 10.7.0" in message
    assert (
        "rebuild with: "
        "python -m triton_kit.build_engines resnet50 --engine tensorrt --precision int8" in message
    )
    assert isinstance(caught.value, ServerError)


def test_other_gpu_is_refused(tmp_path: Path, family_onnx) -> None:
    repo = _plan_repository(tmp_path, _sidecar(), family_onnx)
    with pytest.raises(PlanMismatchError, match=r"compute 9.0.*NVIDIA A10G \(compute 8.6\)"):
        check_plans(repo, TRT_10_5, [Gpu("NVIDIA A10G", "8.6")])
    with pytest.raises(PlanMismatchError, match="no GPU here"):
        check_plans(repo, TRT_10_5, [])


def test_no_tensorrt_visible_is_refused(tmp_path: Path, family_onnx) -> None:
    repo = _plan_repository(tmp_path, _sidecar(), family_onnx)
    problems = find_problems(repo, TensorRTRuntime(None, "no tensorrt package"), H100)
    assert len(problems) == 1 and "no TensorRT is visible here" in problems[0].reason


def test_compatibility_levels_widen_what_is_accepted(tmp_path: Path, family_onnx) -> None:
    options = TensorRTOptions(version_compatible=True, hardware_compatibility_level="ampere+")
    repo = _plan_repository(tmp_path, _sidecar(build_options=options.as_record()), family_onnx)
    vc = {"version_compatible_enabled": True}  # Triton runs with the backend config
    check_plans(repo, TensorRTRuntime("10.7.0", "test"), [Gpu("NVIDIA L4", "8.9")], **vc)
    with pytest.raises(PlanMismatchError, match=r"needs 10\.5\.0 or later"):
        check_plans(repo, TensorRTRuntime("10.4.0", "test"), H100, **vc)
    with pytest.raises(PlanMismatchError, match=r"compute 7\.5"):
        check_plans(repo, TRT_10_5, [Gpu("Tesla T4", "7.5")], **vc)


def test_plan_without_sidecar_is_refused(tmp_path: Path, family_onnx) -> None:
    repo = _plan_repository(tmp_path, None, family_onnx)
    with pytest.raises(
        PlanMismatchError,
        match=r"no model\.plan\.json.*python -m triton_kit.build_engines resnet50",
    ):
        check_plans(repo, TRT_10_5, H100)


def test_launcher_refuses_before_starting(tmp_path: Path, family_onnx) -> None:
    """TritonServer.start() checks plans first; on this machine there is no TensorRT."""
    from triton_kit.server import ServerConfig, TritonServer

    if HAS_TENSORRT:
        pytest.skip("TensorRT is installed here: the 'no TensorRT' refusal cannot be shown")
    repo = _plan_repository(tmp_path, _sidecar(), family_onnx)
    with pytest.raises(PlanMismatchError, match="rebuild with"):
        TritonServer(
            ServerConfig(model_repository=repo, http_port=0, grpc_port=0, metrics_port=0)
        ).start()


def test_sidecar_round_trips() -> None:
    sidecar = _sidecar(profiles=[{"x": {"min": [1], "opt": [2], "max": [3]}}])
    assert Sidecar.from_json(sidecar.to_json()) == sidecar


def test_device_parsing() -> None:
    gpus = parse_nvidia_smi("NVIDIA H100 80GB HBM3, 9.0\nNVIDIA A10G, 8.6\n")
    assert gpus == [Gpu("NVIDIA H100 80GB HBM3", "9.0"), Gpu("NVIDIA A10G", "8.6")]
    assert release("10.5.0.18") == "10.5.0" and release("libnvinfer.so.10.7.0") == "10.7.0"


def test_reproduce_script_is_runnable_bash(family_onnx) -> None:
    profiles = _profiles("resnet50_model", family_onnx("resnet50_model"))
    command = trtexec_command(Path("a b.onnx"), Path("m.plan"), profiles, TensorRTOptions())
    script = reproduce_script(
        command, "python -m triton_kit.build_engines resnet50 --engine tensorrt", "x"
    )
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script
    assert "'--onnx=a b.onnx'" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0


# -- without TensorRT: a clear failure ---------------------------------------------------


@pytest.mark.skipif(HAS_TENSORRT, reason="TensorRT is installed: the missing-TensorRT path is moot")
def test_missing_tensorrt_says_how_to_get_it(tmp_path: Path, family_onnx) -> None:
    with pytest.raises(TensorRTUnavailable, match="docker compose run --rm build-engines"):
        import_tensorrt()
    args = _args(tmp_path, dry_run=False, family="resnet50")
    path = family_onnx("resnet50_model")
    with pytest.raises(TensorRTUnavailable, match="--dry-run"):
        serving.serving_artifacts("resnet50_model", path, _config("resnet50_model"), args, None)
    assert not (tmp_path / "build").exists()  # failed before any calibration


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        TensorRTOptions(builder_optimization_level=6)
    with pytest.raises(ValueError):
        TensorRTOptions(dla_core=0, hardware_compatibility_level="ampere+")


# -- real builds: only where TensorRT and a GPU exist ------------------------------------


@pytest.mark.tensorrt
@pytest.mark.gpu
@pytest.mark.skipif(not HAS_TENSORRT, reason="needs the tensorrt Python package (absent here)")
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU (no nvidia-smi here)")
def test_real_plan_build(tmp_path: Path) -> None:
    import numpy as np
    from onnx import numpy_helper

    from triton_kit.build_engines.engines.tensorrt.builder import build_plan

    weight = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weight],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    profiles = derive_profiles(onnx_inputs(path), 8, {})
    options = TensorRTOptions(timing_cache=tmp_path / "timing.cache", workspace_gb=1)
    built = build_plan(path, profiles, options)
    assert len(built.plan) > 0 and (tmp_path / "timing.cache").stat().st_size > 0
    assert built.tensorrt_version == import_tensorrt().__version__


def test_plan_command_for_built_repository(tmp_path: Path, family_onnx, capsys) -> None:
    """``python -m triton_kit.build_engines.engines.tensorrt`` prints a plan per ONNX model already
    served."""
    from triton_kit.build_engines.engines.tensorrt.__main__ import main

    repo = tmp_path / "repo"
    for name in ("resnet50_model", "nmt_decoder"):
        write_model(repo, _config(name), {"model.onnx": family_onnx(name)})
    code = main(
        ["--output-repository", str(repo), "--work-dir", str(tmp_path / "b"), "--precision", "fp16"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "plan of work for resnet50_model" in out and "plan of work for nmt_decoder" in out
    assert "--maxShapes=pixel_values:16x3x224x224" in out
    assert "past_kv:3x2x1x4x0x32" in out  # the empty first-step cache is in the profile
    assert not (tmp_path / "b").exists()
