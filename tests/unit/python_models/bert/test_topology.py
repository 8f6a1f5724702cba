"""The one-model ``bert`` runs its ONNX Runtime encoder in ONE stub with the whole thread budget.

Why (benchmarks/results/bert_topology.md): with N single-thread instances Triton hands a lone
client's requests to the stubs in turn, and each stub's encoder then runs on caches the
other stub's weights have evicted: a 16-token MiniLM call took 4.4 ms against 3.1 ms in one
stub, and short texts were served at 0.5x a warm in-process session against 1.0x with one
2-thread stub. ``bert_model`` (the ensemble's encoder, served by the native backend in the
container) keeps N single-thread instances.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.python_models.common.ort_session import SessionSettings
from triton_kit.python_models.common.parameters import ModelParameters

SPINNING = "session.intra_op.allow_spinning"


def _config(repository: Path, name: str) -> mc.ModelConfig:
    path = repository / name / "config.pbtxt"
    return text_format.Parse(path.read_text(), mc.ModelConfig())


def _threads(config: mc.ModelConfig) -> int:
    return int(config.parameters["intra_op_thread_count"].string_value)


def test_the_embedding_model_is_one_stub_with_every_encoder_thread(model_repository: Path) -> None:
    bert, encoder = _config(model_repository, "bert"), _config(model_repository, "bert_model")
    budget = sum(group.count for group in encoder.instance_group) * _threads(encoder)
    assert [group.count for group in bert.instance_group] == [1]
    assert _threads(bert) == budget
    assert bert.parameters["inter_op_thread_count"].string_value == "1"
    assert SPINNING not in bert.parameters, "ONNX Runtime's default (spinning) measured best"


def test_the_encoder_session_takes_its_settings_from_the_parameters() -> None:
    from triton_kit.python_models.bert.model import encoder_session_settings

    params = ModelParameters(
        {"intra_op_thread_count": "2", "inter_op_thread_count": "1", SPINNING: "0", "x": "y"}
    )
    assert encoder_session_settings(params) == SessionSettings(2, 1, False, {SPINNING: "0"})


def test_a_repository_built_before_keeps_one_thread_per_stub() -> None:
    """Configs without the session parameters (older builds) still open one thread, as before."""
    from triton_kit.python_models.bert.model import encoder_session_settings

    settings = encoder_session_settings(ModelParameters({"encoder_model": "bert_model"}))
    assert (settings.intra_op_threads, settings.inter_op_threads) == (1, 1)
    assert dict(settings.config_entries) == {}
