"""Defects found by reviewing the TensorRT path against TensorRT 10.5/11.x, trtexec and Triton's
TensorRT backend sources (issue 9). Each test failed before its fix.

TensorRT cannot be installed here, so the builder tests drive it through ``FakeTensorRT``:
a MOCK of the few ``tensorrt`` Python API calls the builder makes (names and semantics
from TensorRT's own docstrings: ``set_timing_cache`` returns a bool, ``can_run_on_DLA``,
``HardwareCompatibilityLevel`` without ``SAME_COMPUTE_CAPABILITY`` before 10.9).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from tests.support.prerequisites import PROJECT_ROOT
from tests.unit.build_engines.test_tensorrt import (
    FAMILY_SPECS,
    H100,
    TRT_10_5,
    _config,
    _onnx,
    _plan_repository,
    _profiles,
    _sidecar,
)
from triton_kit.build_engines.engines.tensorrt.options import TensorRTOptions
from triton_kit.build_engines.engines.tensorrt.trtexec import reproduce_script, trtexec_command

ROOT = PROJECT_ROOT


@pytest.fixture
def family_onnx(tmp_path: Path):
    def make(name: str) -> Path:
        return _onnx(tmp_path / f"{name}.onnx", FAMILY_SPECS[name])

    return make


# -- 1. several profiles need --profile=N before each shape trio ---------------------------


def test_each_profile_gets_its_index_before_its_shapes(family_onnx) -> None:
    profiles = _profiles("bert_model", family_onnx("bert_model"))
    command = trtexec_command(Path("m.onnx"), Path("m.plan"), profiles, TensorRTOptions())
    shapes = [c for c in command if c.startswith(("--profile=", "--minShapes", "--optShapes"))]
    shapes += [c for c in command if c.startswith("--maxShapes")]
    indices = [c for c in command if c.startswith("--profile=")]
    assert indices == [f"--profile={i}" for i in range(len(profiles))]
    for i in range(len(profiles)):
        at = command.index(f"--profile={i}")
        assert [c.split("=")[0] for c in command[at + 1 : at + 4]] == [
            "--minShapes",
            "--optShapes",
            "--maxShapes",
        ]


# -- 11. input names with ':' are quoted for trtexec ----------------------------------------


def test_input_names_are_quoted() -> None:
    from triton_kit.build_engines.engines.tensorrt.profiles import Profile, ShapeRange

    profile = Profile((("input:0", ShapeRange((1, 3), (4, 3), (8, 3))),))
    command = trtexec_command(Path("m.onnx"), Path("m.plan"), [profile], TensorRTOptions())
    assert "--minShapes='input:0':1x3" in command
    assert "--maxShapes='input:0':8x3" in command


# -- 12. the reproduce script finds trtexec where the images have it -------------------------


def test_reproduce_script_finds_trtexec_or_names_the_image(tmp_path: Path) -> None:
    script = reproduce_script(
        ["trtexec", "--onnx=m.onnx"], "python -m triton_kit.build_engines x", "h"
    )
    assert "/usr/src/tensorrt/bin/trtexec" in script
    assert "nvcr.io/nvidia/tensorrt:" in script
    path = tmp_path / "reproduce.sh"
    path.write_text(script)
    env = {"PATH": "/usr/bin:/bin", "TRTEXEC": ""}
    result = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert result.returncode != 0 and "trtexec not found" in result.stderr


# -- 6. the build image keeps NVIDIA's entrypoint (CUDA forward compatibility) -------------


def _dockerfile() -> str:
    return (ROOT / "docker" / "build-engines.Dockerfile").read_text()


def test_build_image_keeps_nvidias_entrypoint() -> None:
    entrypoint = re.search(r"^ENTRYPOINT (.+)$", _dockerfile(), re.M)
    assert entrypoint is not None
    assert entrypoint.group(1).startswith('["/opt/nvidia/nvidia_entrypoint.sh"')


# -- 5. four-part PyPI versions ------------------------------------------------------------


def test_tensorrt_version_build_arg_matches_four_part_pypi_versions() -> None:
    spec = re.search(r'"tensorrt-cu12(?P<spec>[^"]+)"', _dockerfile())
    assert spec is not None
    for arg, pypi in (("10.5.0", "10.5.0"), ("10.8.0", "10.8.0.43"), ("10.9.0", "10.9.0.34")):
        text = spec["spec"].replace("${TENSORRT_VERSION}", arg)
        assert pypi in SpecifierSet(text), (text, pypi)


def test_four_part_build_version_matches_the_three_part_runtime(tmp_path, family_onnx) -> None:
    from triton_kit.server.plan_check import find_problems
    from triton_kit.server.tensorrt_device import TensorRTRuntime

    sidecar = _sidecar(tensorrt_version="10.8.0.43")
    repo = _plan_repository(tmp_path, sidecar, family_onnx)
    assert find_problems(repo, TensorRTRuntime("10.8.0", "libnvinfer.so.10.8.0"), H100) == []


# -- 3. version-compatible plans need Triton's backend config --------------------------------


def test_version_compatible_plan_needs_the_backend_config(tmp_path, family_onnx) -> None:
    from triton_kit.server.plan_check import find_problems

    options = {**TensorRTOptions().as_record(), "version_compatible": True}
    repo = _plan_repository(tmp_path, _sidecar(build_options=options), family_onnx)
    problems = find_problems(repo, TRT_10_5, H100)
    assert len(problems) == 1
    assert "--backend-config=tensorrt,version-compatible=true" in str(problems[0])


def test_compose_passes_the_backend_config_when_the_repository_needs_it() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = " ".join(compose["services"]["triton"]["command"])
    assert "tensorrt_sidecar backend-config /models" in command


# -- 9. warm every profile ---------------------------------------------------------------


def test_warmup_covers_every_profile(family_onnx) -> None:
    from triton_kit.build_engines.engines.tensorrt.config import tensorrt_plan_config

    profiles = _profiles("bert_model", family_onnx("bert_model"))
    config = tensorrt_plan_config(_config("bert_model"), profiles, TensorRTOptions(warmup=True))
    lengths = sorted(w.inputs["input_ids"].dims[0] for w in config.model_warmup)
    assert lengths == sorted(p.as_dict()["input_ids"].opt[1] for p in profiles)
    assert len(config.model_warmup) == len(profiles) == 4


# -- 10. a dry run writes nothing: tests/build/build_engines/test_tensorrt_dry_run.py -------


# -- builder: a MOCK of TensorRT's Python API (TensorRT cannot be installed here) ----------


class FakeConfig:
    def __init__(self, accept_cache: bool = True, dla_layers: frozenset = frozenset()) -> None:
        self.accept_cache = accept_cache
        self.dla_layers = dla_layers
        self.flags: set[str] = set()
        self.caches: list[bytes] = []
        self.attached: bytes | None = None

    def set_memory_pool_limit(self, pool, size) -> None: ...

    def set_flag(self, flag) -> None:
        self.flags.add(flag)

    def create_timing_cache(self, blob: bytes):
        self.caches.append(blob)
        return blob

    def set_timing_cache(self, cache, ignore_mismatch: bool) -> bool:
        if cache and not self.accept_cache:
            return False  # another GPU's or TensorRT's cache
        self.attached = cache
        return True

    def can_run_on_DLA(self, layer) -> bool:
        return layer in self.dla_layers


class FakeTensorRT:
    """MOCK ``tensorrt`` module of the given version."""

    def __init__(self, version: str, config: FakeConfig) -> None:
        self.__version__ = version
        self._config = config
        self.MemoryPoolType = SimpleNamespace(WORKSPACE="workspace")
        self.ProfilingVerbosity = SimpleNamespace(LAYER_NAMES_ONLY=1, DETAILED=2, NONE=0)
        self.BuilderFlag = SimpleNamespace(
            SPARSE_WEIGHTS="sparse", VERSION_COMPATIBLE="vc", GPU_FALLBACK="fallback"
        )
        self.DeviceType = SimpleNamespace(DLA="dla", GPU="gpu")
        levels = {"NONE": 0, "AMPERE_PLUS": 1}
        if tuple(int(p) for p in version.split(".")[:2]) >= (10, 9):
            levels["SAME_COMPUTE_CAPABILITY"] = 2
        self.HardwareCompatibilityLevel = SimpleNamespace(**levels)

    def builder(self, dla_cores: int = 0):
        return SimpleNamespace(create_builder_config=lambda: self._config, num_DLA_cores=dla_cores)


def test_same_compute_capability_needs_tensorrt_10_9() -> None:
    from triton_kit.build_engines.engines.tensorrt.builder import PlanBuildError, builder_config

    options = TensorRTOptions(hardware_compatibility_level="same-compute-capability")
    trt = FakeTensorRT("10.5.0.18", FakeConfig())
    with pytest.raises(PlanBuildError, match=r"TensorRT 10\.9.*10\.5\.0"):
        builder_config(trt, trt.builder(), options)
    newer = FakeTensorRT("10.9.0.34", FakeConfig())
    assert builder_config(newer, newer.builder(), options).hardware_compatibility_level == 2


def test_timing_cache_from_another_gpu_is_rebuilt(tmp_path: Path, capsys) -> None:
    from triton_kit.build_engines.engines.tensorrt.builder import attach_timing_cache

    path = tmp_path / "timing.cache"
    path.write_bytes(b"cache of an A100")
    config = FakeConfig(accept_cache=False)
    cache = attach_timing_cache(config, path)
    assert config.caches == [b"cache of an A100", b""]  # refused, then a fresh one
    assert cache == b"" and config.attached == b""
    assert "timing cache" in capsys.readouterr().err


def test_dla_reports_layers_that_fall_back_to_the_gpu(capsys) -> None:
    from triton_kit.build_engines.engines.tensorrt.builder import use_dla

    layers = ["conv", "softmax", "topk"]
    network = SimpleNamespace(num_layers=3, get_layer=lambda i: layers[i])
    config = FakeConfig(dla_layers=frozenset({"conv"}))
    trt = FakeTensorRT("10.5.0", config)
    fallback = use_dla(trt, trt.builder(dla_cores=2), config, 1, network)
    assert fallback == ["softmax", "topk"]
    assert "2 of 3 layers fall back to the GPU" in capsys.readouterr().out


# -- 4. DLA: static shapes, FP16/INT8 only --------------------------------------------------


def _dry_run(tmp_path: Path, name: str, family_onnx, **options: object) -> str:
    from tests.unit.build_engines.test_tensorrt import _args
    from triton_kit.build_engines import serving

    args = _args(tmp_path, family=name.split("_")[0], **options)
    with pytest.raises(serving.DryRun):
        serving.serving_artifacts(name, family_onnx(name), _config(name), args, lambda: [])
    return args


def test_dla_profiles_are_static(tmp_path: Path, family_onnx, capsys) -> None:
    _dry_run(tmp_path, "bert_model", family_onnx, precision="fp16", dla_core=0)
    out = capsys.readouterr().out
    shapes = re.findall(r"profile \d+ input_ids: min (\S+) opt (\S+) max (\S+)", out)
    assert len(shapes) == 4 and all(a == b == c for a, b, c in shapes), shapes
    assert "--minShapes=input_ids:8x16,attention_mask:8x16" in out  # the opt shape, fixed


def test_fp32_on_dla_is_refused(tmp_path: Path, family_onnx) -> None:
    with pytest.raises(ValueError, match="DLA runs FP16 or INT8"):
        _dry_run(tmp_path, "resnet50_model", family_onnx, precision="fp32", dla_core=0)


# -- 8. the runtime version is the one the server's TensorRT backend links ------------------


def test_runtime_version_comes_from_the_servers_libnvinfer(tmp_path: Path, monkeypatch) -> None:
    from triton_kit.server import tensorrt_device as device

    backend = tmp_path / "tritonserver" / "backends" / "tensorrt"
    backend.mkdir(parents=True)
    (backend / "libtriton_tensorrt.so").write_bytes(b"")
    binary = tmp_path / "tritonserver" / "bin" / "tritonserver"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{binary.parent}:/usr/bin:/bin")
    monkeypatch.delenv("TRT_VERSION", raising=False)
    # MOCK: a tensorrt Python package of another version, and ldd's answer for the backend.
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.7.0.23"))
    monkeypatch.setattr(
        device,
        "linked_libnvinfer",
        lambda lib: Path("/usr/lib/libnvinfer.so.10.5.0"),
        raising=False,
    )
    runtime = device.tensorrt_runtime()
    assert runtime.version == "10.5.0"
    assert "libtriton_tensorrt.so" in runtime.source


# -- the engine registry: one place to add an engine ---------------------------------------


def test_every_registered_engine_is_a_cli_choice_with_a_complete_step() -> None:
    from triton_kit.build_engines.cli import build_parser
    from triton_kit.build_engines.engines.step import step_of
    from triton_kit.build_engines.serving import Engine

    family = build_parser()._subparsers._group_actions[0].choices["resnet50"]
    (engine_flag,) = [a for a in family._actions if "--engine" in a.option_strings]
    assert list(engine_flag.choices) == [engine.value for engine in Engine]
    for engine in Engine:
        step = step_of(engine)
        for function in ("validate", "check_available", "artifacts", "describe"):
            assert callable(getattr(step, function)), (engine, function)


# -- each default is written once: in the option dataclasses -------------------------------


def test_cli_defaults_are_the_dataclass_defaults_and_the_rebuild_command_omits_them(
    tmp_path: Path,
) -> None:
    from dataclasses import asdict

    from triton_kit.build_engines.cli import build_parser, family_options
    from triton_kit.build_engines.options import BuildOptions, rebuild_command
    from triton_kit.build_engines.precision import CalibrationSettings

    args = build_parser().parse_args(["resnet50", "--precision", "int8", "--engine", "tensorrt"])
    for name, default in asdict(TensorRTOptions()).items():
        if name != "timing_cache":
            assert getattr(args, name) in (default, None), name
    for name, default in asdict(CalibrationSettings()).items():
        assert getattr(args, f"calibration_{name}") == default, name
    options = family_options("resnet50", args)
    assert isinstance(options, BuildOptions) and options.calibration == CalibrationSettings()
    assert rebuild_command(options, "resnet50_model") == (
        "python -m triton_kit.build_engines resnet50 --engine tensorrt --precision int8"
    )
    changed = ["--workspace-gb", "2", "--sparsity", "--calibration-size", "8", "--dla-core", "0"]
    args = build_parser().parse_args(["bert", "--precision", "int8", *changed])
    command = rebuild_command(family_options("bert", args), "bert_model")
    assert "--workspace-gb 2.0 --sparsity --dla-core 0" in command
    assert command.endswith("--calibration-size 8")
