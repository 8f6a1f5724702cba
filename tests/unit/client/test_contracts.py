"""Contracts defined once server-side (python_models) and the copies that must match them."""

from __future__ import annotations

from triton_kit.build_engines.repository import Tensor, onnx_model_config
from triton_kit.client.options import DEFAULT_MODELS, FAMILY_METHODS
from triton_kit.python_models.common import contracts
from triton_kit.python_models.common.ort_session import SessionSettings, session_options


def test_the_sdk_table_names_every_family_once() -> None:
    """Which method calls which model lives only in the SDK; served code needs none of it."""
    assert DEFAULT_MODELS == {"classify": "resnet50", "embed": "bert", "translate": "nmt"}
    assert FAMILY_METHODS == {"resnet50": "classify", "bert": "embed", "nmt": "translate"}
    assert not hasattr(contracts, "FAMILY_METHODS")
    assert {contracts.family_of(model) for model in DEFAULT_MODELS.values()} == set(FAMILY_METHODS)


def test_family_of_model_names() -> None:
    assert [contracts.family_of(n) for n in ("bert_model", "nmt", "resnet50_postprocess")] == [
        "bert",
        "nmt",
        "resnet50",
    ]


def test_sessions_get_the_options_the_config_serves_with() -> None:
    config = onnx_model_config(
        "m", [Tensor("x", "FP32", (4,))], [Tensor("y", "FP32", (4,))], 8, threads=3
    )
    config.parameters["session.intra_op.allow_spinning"].string_value = "0"
    parameters = {k: v.string_value for k, v in config.parameters.items()}
    options = session_options(SessionSettings.from_parameters(parameters))
    assert options.intra_op_num_threads == 3 and options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
