"""Every config.pbtxt must parse with Triton's own schema and compose consistently."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.repository import Tensor, onnx_model_config, parse, render
from triton_kit.python_models.common.parameters import ModelParameters, ParameterError


def _configs(repository: Path) -> dict[str, mc.ModelConfig]:
    configs = {}
    for path in sorted(repository.glob("*/config.pbtxt")):
        configs[path.parent.name] = text_format.Parse(path.read_text(), mc.ModelConfig())
    return configs


def test_every_config_parses_with_tritons_schema(model_repository: Path) -> None:
    configs = _configs(model_repository)
    assert "resnet50" in configs, "model_repository has no resnet50: run `make models`"
    for name, config in configs.items():
        assert config.name == name, f"{name}/config.pbtxt names itself {config.name!r}"


def test_ensembles_compose_existing_models_within_batch_limits(model_repository: Path) -> None:
    configs = _configs(model_repository)
    for name, config in configs.items():
        if config.platform != "ensemble":
            continue
        for step in config.ensemble_scheduling.step:
            assert step.model_name in configs, f"ensemble {name} uses missing {step.model_name}"
            inner = configs[step.model_name]
            assert config.max_batch_size <= inner.max_batch_size, (
                f"ensemble {name} max_batch_size {config.max_batch_size} exceeds "
                f"{step.model_name}'s {inner.max_batch_size}"
            )


def test_python_models_are_one_line_shims(model_repository: Path) -> None:
    shims = sorted(model_repository.glob("*/1/model.py"))
    names = {path.parent.parent.name for path in shims}
    # (the default nmt is the ctranslate2 backend's text mode, no python model)
    expected = {"resnet50_preprocess", "resnet50_postprocess", "bert_preprocess", "nmt_rnn"}
    assert expected <= names, f"python models missing from {model_repository}: {names}"
    for model_py in shims:
        code = [
            line
            for line in model_py.read_text().splitlines()
            if line.strip() and not line.startswith(('"""', "#"))
        ]
        assert len(code) == 1 and code[0].startswith("from triton_kit.python_models."), model_py


def test_unknown_field_is_rejected_by_the_schema() -> None:
    with pytest.raises(text_format.ParseError):
        parse('name: "x"\nmax_batch_size: 4\nnot_a_field: 1\n')


def test_rendered_config_round_trips() -> None:
    config = onnx_model_config(
        "m",
        [Tensor("a", "FP32", (3,))],
        [Tensor("b", "INT64", (-1,))],
        8,
        threads=2,
        dynamic_batching_delay_us=100,
    )
    assert parse(render(config)) == config
    assert config.parameters["intra_op_thread_count"].string_value == "2"


@pytest.mark.parametrize(
    ("text", "expected"), [("true", True), ("False", False), ("1", True), ("no", False)]
)
def test_boolean_parameters_parse_strictly(text: str, expected: bool) -> None:
    assert ModelParameters({"flag": text}).bool("flag") is expected


def test_malformed_parameter_names_the_key() -> None:
    with pytest.raises(ParameterError, match="'flag'"):
        ModelParameters({"flag": "maybe"}).bool("flag")
    with pytest.raises(ParameterError, match="'top_k'"):
        ModelParameters({"top_k": "five"}).int("top_k")
