"""triton_kit.python_models.common.parameters and .contracts without a server (fast: mutation
runs)."""

from __future__ import annotations

import pytest

from triton_kit.python_models.common import contracts
from triton_kit.python_models.common.parameters import ModelParameters, ParameterError


def _params(**values: str) -> ModelParameters:
    return ModelParameters(values)


def test_from_config_reads_string_values() -> None:
    config = {"parameters": {"a": {"string_value": " 7 "}, "b": {}}}
    params = ModelParameters.from_config(config)
    assert params.as_dict() == {"a": " 7 ", "b": ""}
    assert params.int("a") == 7  # stripped when read
    assert "a" in params and "c" not in params
    assert ModelParameters.from_config({}).as_dict() == {}
    assert ModelParameters.from_config({"parameters": None}).as_dict() == {}


def test_as_dict_is_a_copy() -> None:
    params = _params(a="1")
    params.as_dict()["a"] = "2"
    assert params.int("a") == 1


def test_str() -> None:
    assert _params(name="  x y ").str("name") == "x y"
    assert _params().str("name", "fallback") == "fallback"
    with pytest.raises(ParameterError) as caught:
        _params().str("name")
    assert str(caught.value) == "config.pbtxt parameter 'name' is required"


def test_int() -> None:
    assert _params(n="-12").int("n") == -12
    assert _params(n="3").int("n", 9) == 3
    assert _params().int("n", 9) == 9
    assert _params().int("n", 0) == 0  # a falsy default is a default, not "required"
    with pytest.raises(ParameterError, match=r"^config\.pbtxt parameter 'n' is required$"):
        _params().int("n")
    with pytest.raises(ParameterError) as caught:
        _params(n="2.5").int("n")
    assert str(caught.value) == "parameter 'n' must be an integer, got '2.5'"
    assert isinstance(caught.value, ValueError)


def test_float() -> None:
    assert _params(x="0.25").float("x") == 0.25
    assert _params(x="1e-3").float("x", 5.0) == 0.001
    assert _params().float("x", 5.0) == 5.0
    assert _params().float("x", 0.0) == 0.0
    with pytest.raises(ParameterError, match=r"^config\.pbtxt parameter 'x' is required$"):
        _params().float("x")
    with pytest.raises(ParameterError) as caught:
        _params(x="abc").float("x")
    assert str(caught.value) == "parameter 'x' must be a number, got 'abc'"


@pytest.mark.parametrize("text", ["1", "true", "TRUE", " yes ", "On"])
def test_bool_true(text: str) -> None:
    assert _params(flag=text).bool("flag") is True


@pytest.mark.parametrize("text", ["0", "false", "False", "no", "OFF"])
def test_bool_false(text: str) -> None:
    assert _params(flag=text).bool("flag", True) is False


def test_bool_default_and_errors() -> None:
    assert _params().bool("flag", True) is True
    assert _params().bool("flag", False) is False
    with pytest.raises(ParameterError, match=r"^config\.pbtxt parameter 'flag' is required$"):
        _params().bool("flag")
    with pytest.raises(ParameterError) as caught:
        _params(flag="maybe").bool("flag")
    assert str(caught.value) == "parameter 'flag' must be true or false, got 'maybe'"


def test_int_list() -> None:
    assert _params(b="16, 32,64,").int_list("b") == [16, 32, 64]
    assert _params(b="").int_list("b", [1]) == []
    assert _params().int_list("b", (1, 2)) == [1, 2]
    assert _params().int_list("b", []) == []
    with pytest.raises(ParameterError, match=r"^config\.pbtxt parameter 'b' is required$"):
        _params().int_list("b")
    with pytest.raises(ParameterError) as caught:
        _params(b="1,x").int_list("b")
    assert str(caught.value) == "parameter 'b' must be comma-separated integers, got '1,x'"


def test_contract_names() -> None:
    assert (contracts.IMAGE, contracts.CLASS_IDS, contracts.SCORES, contracts.LABELS) == (
        "IMAGE",
        "CLASS_IDS",
        "SCORES",
        "LABELS",
    )
    assert contracts.CLASSIFY_OUTPUTS == ("CLASS_IDS", "SCORES", "LABELS")


@pytest.mark.parametrize(
    ("name", "family"),
    [("bert_model", "bert"), ("nmt", "nmt"), ("resnet50_pre_x", "resnet50"), ("nmt_rnn", "nmt")],
)
def test_family_of(name: str, family: str) -> None:
    assert contracts.family_of(name) == family
