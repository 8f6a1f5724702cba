"""Served-model settings parsed from config parameters, without a server (fast: mutation runs).

python_models.nmt.settings (decode settings and limits), ort_session (the session options
the native onnxruntime backend would apply, read back from ONNX Runtime), sibling (which
ONNX file a python model runs in-process) and serving_policy (the queue defaults).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_kit.python_models.common.ort_session import SessionSettings, session_options, threaded
from triton_kit.python_models.common.parameters import ModelParameters, ParameterError
from triton_kit.python_models.common.serving_policy import (
    BOUNDED_QUEUE_POLICY,
    DEFAULT_QUEUE_POLICY,
    QueuePolicy,
)
from triton_kit.python_models.common.sibling import sibling_file
from triton_kit.python_models.nmt.decode import DecodeSettings
from triton_kit.python_models.nmt.settings import (
    DEFAULT_MAX_BEAM_TOKENS,
    Limits,
    from_parameters,
    to_parameters,
)

SETTINGS = DecodeSettings(
    decoder_start_token_id=59513,
    eos_token_id=0,
    pad_token_id=59513,
    cache_shape=(6, 8, 64),
    suppressed_token_ids=(59513, 7),
    forced_eos=True,
    length_penalty=1.5,
    early_stopping=True,
    recurrent_state=False,
)
LIMITS = Limits(
    default_beam_size=4,
    max_beam_size=16,
    default_max_length=64,
    max_target_length=128,
    max_source_length=512,
)
WRITTEN = {
    "decoder_start_token_id": "59513",
    "eos_token_id": "0",
    "pad_token_id": "59513",
    "suppressed_token_ids": "59513,7",
    "forced_eos": "true",
    "length_penalty": "1.5",
    "early_stopping": "true",
    "decoder_layers": "6",
    "decoder_heads": "8",
    "head_dim": "64",
    "recurrent_state": "false",
    "default_beam_size": "4",
    "max_beam_size": "16",
    "default_max_length": "64",
    "max_target_length": "128",
    "max_source_length": "512",
}


def _as_config(parameters: dict[str, object]) -> dict[str, str]:
    """What config.pbtxt holds: every value a string (booleans lower case, as the build writes)."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in parameters.items()}


def test_to_parameters_writes_every_field() -> None:
    assert _as_config(to_parameters(SETTINGS, LIMITS)) == WRITTEN


def test_from_parameters_reads_every_field() -> None:
    settings, limits = from_parameters(ModelParameters(WRITTEN))
    assert settings == SETTINGS
    assert limits == LIMITS
    assert limits.max_text_bytes == 65536 and limits.max_beam_tokens == DEFAULT_MAX_BEAM_TOKENS
    assert DEFAULT_MAX_BEAM_TOKENS == 16384


def test_optional_parameters() -> None:
    extra = {**WRITTEN, "max_text_bytes": "100", "max_beam_tokens": "200"}
    extra.update(suppressed_token_ids=" 1 , 2,", recurrent_state="true", early_stopping="never")
    settings, limits = from_parameters(ModelParameters(extra))
    assert settings.suppressed_token_ids == (1, 2) and settings.recurrent_state is True
    assert settings.early_stopping == "never"
    assert limits.max_text_bytes == 100 and limits.max_beam_tokens == 200
    minimal = {k: v for k, v in WRITTEN.items() if k not in {"suppressed_token_ids"}}
    minimal.pop("recurrent_state")
    settings, _ = from_parameters(ModelParameters(minimal))
    assert settings.suppressed_token_ids == () and settings.recurrent_state is False
    settings, _ = from_parameters(ModelParameters({**WRITTEN, "early_stopping": "false"}))
    assert settings.early_stopping is False


def test_bad_early_stopping_and_missing_parameters() -> None:
    with pytest.raises(ValueError) as caught:
        from_parameters(ModelParameters({**WRITTEN, "early_stopping": "sometimes"}))
    assert str(caught.value) == "early_stopping must be true, false or never, got 'sometimes'"
    for key in ("eos_token_id", "head_dim", "max_source_length", "length_penalty"):
        broken = {k: v for k, v in WRITTEN.items() if k != key}
        with pytest.raises(ParameterError, match=f"parameter '{key}' is required"):
            from_parameters(ModelParameters(broken))


def test_session_settings_from_parameters() -> None:
    parameters = {
        "intra_op_thread_count": "3",
        "inter_op_thread_count": "2",
        "execution_mode": "1",
        "session.use_env_allocators": "1",
        "other": "x",
    }
    assert SessionSettings.from_parameters(parameters) == SessionSettings(
        intra_op_threads=3,
        inter_op_threads=2,
        parallel=True,
        config_entries={"session.use_env_allocators": "1"},
    )
    assert SessionSettings.from_parameters({}) == SessionSettings(0, 0, False, {})
    blank = {"intra_op_thread_count": "", "execution_mode": "0"}
    assert SessionSettings.from_parameters(blank) == SessionSettings()
    assert SessionSettings().log_severity == 3


def test_session_options_as_onnxruntime_reads_them() -> None:
    import onnxruntime as ort

    settings = SessionSettings(5, 2, True, {"session.intra_op.allow_spinning": "0"})
    options = session_options(settings)
    assert options.intra_op_num_threads == 5 and options.inter_op_num_threads == 2
    assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.log_severity_level == 3
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    sequential = session_options(SessionSettings())
    assert sequential.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert sequential.intra_op_num_threads == 0


def test_threaded() -> None:
    assert threaded(4) == SessionSettings(intra_op_threads=4, inter_op_threads=1)
    assert threaded(0) == SessionSettings(intra_op_threads=0, inter_op_threads=0)


def test_sibling_file_picks_the_highest_numeric_version(tmp_path: Path) -> None:
    me = tmp_path / "nmt" / "1"
    me.mkdir(parents=True)
    assert sibling_file(me, "nmt_encoder") is None  # no such model
    for version in ("2", "10", "9", "latest"):
        (tmp_path / "nmt_encoder" / version).mkdir(parents=True)
        (tmp_path / "nmt_encoder" / version / "model.onnx").write_bytes(b"x")
    (tmp_path / "nmt_encoder" / "11").write_text("a file, not a version")
    assert sibling_file(me, "nmt_encoder") == tmp_path / "nmt_encoder" / "10" / "model.onnx"
    (tmp_path / "nmt_encoder" / "12").mkdir()  # highest version serves something else
    assert sibling_file(me, "nmt_encoder") is None
    (tmp_path / "nmt_encoder" / "12" / "model.plan").write_bytes(b"p")
    found = sibling_file(me, "nmt_encoder", filename="model.plan")
    assert found == tmp_path / "nmt_encoder" / "12" / "model.plan"
    (tmp_path / "nmt_decoder").mkdir()
    assert sibling_file(me, "nmt_decoder") is None  # a model with no version folder


def test_queue_policy_defaults() -> None:
    assert QueuePolicy(0, 0, False) == DEFAULT_QUEUE_POLICY and DEFAULT_QUEUE_POLICY.off
    assert QueuePolicy(128, 5_000_000, True) == BOUNDED_QUEUE_POLICY
    assert not BOUNDED_QUEUE_POLICY.off and not QueuePolicy(max_queue_size=1).off
    assert not QueuePolicy(default_timeout_us=1).off
    assert not QueuePolicy(allow_timeout_override=True).off
