"""Structure that keeps Triton's serving overhead small (issue 11); speed is in
triton_kit/benchmarks/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.prerequisites import MODEL_REPOSITORY
from triton_kit.build_engines.repository import parse
from triton_kit.python_models.common.sibling import sibling_file


def test_sibling_file_is_the_served_version(tmp_path: Path) -> None:
    caller = tmp_path / "bert" / "1"
    caller.mkdir(parents=True)
    for version in ("1", "3", "10"):
        (tmp_path / "bert_model" / version).mkdir(parents=True)
    (tmp_path / "bert_model" / "3" / "model.onnx").write_bytes(b"x")
    assert sibling_file(caller, "bert_model") is None  # version 10 is served and has no ONNX
    (tmp_path / "bert_model" / "10" / "model.onnx").write_bytes(b"x")
    assert sibling_file(caller, "bert_model") == tmp_path / "bert_model" / "10" / "model.onnx"


def test_sibling_serving_a_plan_has_no_onnx(tmp_path: Path) -> None:
    (tmp_path / "bert" / "1").mkdir(parents=True)
    (tmp_path / "bert_model" / "1").mkdir(parents=True)
    (tmp_path / "bert_model" / "1" / "model.plan").write_bytes(b"x")
    assert sibling_file(tmp_path / "bert" / "1", "bert_model") is None
    assert sibling_file(tmp_path / "bert" / "1", "missing_model") is None


@pytest.mark.parametrize(
    "model", ["bert", "bert_model", "bert_preprocess", "nmt", "nmt_ct2", "resnet50_model"]
)
def test_idle_server_never_waits_in_a_queue(model: str) -> None:
    """A lone request must not wait for a batch to fill (it did: 2 ms + 0.5 ms for bert)."""
    path = MODEL_REPOSITORY / model / "config.pbtxt"
    if not path.exists():
        pytest.skip(f"{model} not built")
    batching = parse(path.read_text()).dynamic_batching
    assert batching.max_queue_delay_microseconds == 0
    assert not batching.preferred_batch_size


def test_bert_is_one_python_model() -> None:
    """Tokenizer and encoder in one stub: no IPC hop between models."""
    path = MODEL_REPOSITORY / "bert" / "config.pbtxt"
    if not path.exists():
        pytest.skip("bert not built")
    config = parse(path.read_text())
    assert config.backend == "python" and not config.ensemble_scheduling.step
    assert sibling_file(MODEL_REPOSITORY / "bert" / "1", "bert_model") is not None


def test_nmt_search_finds_its_graphs_in_process(nmt_python_search) -> None:
    """The Python search (``--engine onnxruntime --search python``) runs the encoder/decoder
    files itself: no Triton round trip per step."""
    from triton_kit.python_models.nmt.model import step_model
    from triton_kit.python_models.nmt.ort import SessionStepModel

    version_dir = nmt_python_search / "nmt" / "1"
    assert isinstance(step_model(version_dir, "nmt_encoder", "nmt_decoder", 1), SessionStepModel)
