"""``triton_kit.python_models.bert.model`` (tokenizer + encoder in one stub) without a server.

The tokenizer is the nine-word WordPiece of
tests/unit/python_models/bert/test_tokenizer_model.py; the encoder is an ONNX graph
written here whose "embedding" of a row is (sum of the ids it attends to, tokens attended,
padded length), so every expected value is read off the vocabulary by hand:
"hello world" is [CLS] hello world [SEP] = 2 + 4 + 5 + 3 = 14 over 4 tokens. The BLS
fallback runs the same arithmetic in numpy behind tests/support/pb_utils_standin.py.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.support import pb_utils_standin as standin
from tests.support.pb_utils_standin import error_of, outputs, request
from tests.unit.python_models.bert.test_tokenizer_model import write_tokenizer
from triton_kit.python_models.bert import model as bert
from triton_kit.python_models.bert.model import BertEmbeddingModel, encoder_session_settings
from triton_kit.python_models.common.base import PROFILE_DIR_ENV
from triton_kit.python_models.common.ort_session import SessionSettings
from triton_kit.python_models.common.parameters import ModelParameters


def _encoder_onnx(path: Path) -> Path:
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", "l"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["n", "l"])
    out = helper.make_tensor_value_info("EMBEDDING", TensorProto.FLOAT, ["n", 3])
    first = helper.make_tensor_value_info("token_sum", TensorProto.INT64, ["n", 1])
    nodes = [
        helper.make_node("Mul", ["input_ids", "attention_mask"], ["kept"]),
        helper.make_node("ReduceSum", ["kept"], ["s1"], axes=[1], keepdims=1),
        helper.make_node("ReduceSum", ["attention_mask"], ["s2"], axes=[1], keepdims=1),
        helper.make_node("Equal", ["input_ids", "input_ids"], ["same"]),
        helper.make_node("Cast", ["same"], ["ones"], to=TensorProto.INT64),
        helper.make_node("ReduceSum", ["ones"], ["s3"], axes=[1], keepdims=1),
        helper.make_node("Concat", ["s1", "s2", "s3"], ["cat"], axis=1),
        helper.make_node("Cast", ["cat"], ["EMBEDDING"], to=TensorProto.FLOAT),
    ]
    # EMBEDDING is the second output, as a real export's comes after last_hidden_state.
    nodes.append(helper.make_node("Identity", ["s1"], ["token_sum"]))
    graph = helper.make_graph(nodes, "toy_encoder", [ids, mask], [first, out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _numpy_encoder(feeds: dict[str, np.ndarray]) -> np.ndarray:
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    width = np.full(len(ids), ids.shape[1])
    return np.stack([(ids * mask).sum(1), mask.sum(1), width], axis=1).astype(np.float32)


def _config(max_batch_size: int = 8, **parameters: str) -> dict:
    values = {"max_length": "8", "buckets": "4,6", "encoder_model": "toy_encoder", **parameters}
    return {
        "name": "bert",
        "max_batch_size": max_batch_size,
        "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [1]}],
        "output": [{"name": "EMBEDDING", "data_type": "TYPE_FP32", "dims": [3]}],
        "parameters": {k: {"string_value": v} for k, v in values.items()},
    }


def _model(repository: Path, config: dict | None = None) -> BertEmbeddingModel:
    (repository / "bert" / "1").mkdir(parents=True, exist_ok=True)
    write_tokenizer(repository / "bert" / "1" / "tokenizer.json")
    model = BertEmbeddingModel()
    model.initialize(
        {
            "model_config": json.dumps(config or _config()),
            "model_name": "bert",
            "model_repository": str(repository / "bert"),
            "model_version": "1",
        }
    )
    return model


@pytest.fixture
def pb_utils(monkeypatch):
    monkeypatch.delenv(PROFILE_DIR_ENV, raising=False)
    return standin.install(
        monkeypatch, "triton_kit.python_models.common.base", "triton_kit.python_models.common.bls"
    )


def _texts(*items: object) -> dict[str, np.ndarray]:
    return {"TEXT": np.array([[item] for item in items], dtype=np.object_)}


def test_in_process_encoder_embeds_each_request_with_bad_ones_failing_alone(
    tmp_path: Path, pb_utils
) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "2" / "model.onnx")
    model = _model(tmp_path)
    assert model.output_name == "EMBEDDING"
    responses = model.execute(
        [
            request(_texts(b"hello world")),  # 2 4 5 3: bucket 4
            request(_texts(b"  ")),
            request(_texts(b"the cat", b"the cats the cats world")),  # bucket 4; 9 -> 8 tokens
            request(_texts(b"hello")),  # 2 4 3: bucket 4, padded
            request(_texts(b"\xff")),
        ]
    )
    assert outputs(responses[0])["EMBEDDING"].tolist() == [[14.0, 4.0, 4.0]]
    assert error_of(responses[1]) == (
        3,
        "TEXT is whitespace only; send at least one non-space character",
    )
    # "the cats the cats world" truncates to [CLS] the cat ##s the cat ##s [SEP]
    assert outputs(responses[2])["EMBEDDING"].tolist() == [
        [2.0 + 6 + 7 + 3, 4.0, 4.0],
        [2.0 + 6 + 7 + 8 + 6 + 7 + 8 + 3, 8.0, 8.0],
    ]
    assert outputs(responses[3])["EMBEDDING"].tolist() == [[9.0, 3.0, 4.0]]
    assert error_of(responses[4])[0] == 3
    assert outputs(responses[0])["EMBEDDING"].dtype == np.float32


def test_an_execute_of_only_bad_requests_runs_no_encoder(tmp_path: Path, pb_utils) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "1" / "model.onnx")
    model = _model(tmp_path)
    responses = model.execute([request(_texts(b"")), request({"TEXT": np.zeros((0, 1), object)})])
    assert error_of(responses[0]) == (3, "TEXT is empty; send at least one non-space character")
    assert error_of(responses[1]) == (3, "TEXT has no elements")
    empty = model.embed([])
    assert empty.shape == (0, 0) and empty.dtype == np.float32


def test_embed_keeps_row_order_across_buckets(tmp_path: Path, pb_utils) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "1" / "model.onnx")
    model = _model(tmp_path)
    rows = [[2, 4, 5, 6, 7, 3], [2, 4, 3], [2, 8, 8, 8, 8, 8, 8, 3], [2, 5, 3]]
    assert model.embed(rows).dtype == np.float32
    assert model.embed(rows).tolist() == [
        [27.0, 6.0, 6.0],
        [9.0, 3.0, 4.0],
        [53.0, 8.0, 8.0],
        [10.0, 3.0, 4.0],
    ]


def test_without_an_onnx_file_the_encoder_is_called_through_bls(
    tmp_path: Path, pb_utils, caplog
) -> None:
    calls: list[tuple[str, list[str], list[int]]] = []

    def encoder_model(model: str, feeds, names):
        calls.append((model, names, list(feeds["input_ids"].shape)))
        tensor = pb_utils.Tensor("EMBEDDING", _numpy_encoder(feeds))
        return pb_utils.InferenceResponse(output_tensors=[tensor])

    pb_utils.bls_handler = encoder_model
    (tmp_path / "toy_encoder" / "1").mkdir(parents=True)  # a version with no model.onnx
    with caplog.at_level(logging.INFO, logger="python_models"):
        model = _model(tmp_path)
    assert "bert: encoder via BLS to toy_encoder" in [r.getMessage() for r in caplog.records]
    responses = model.execute([request(_texts(b"hello world", b"the cats the cats world"))])
    assert outputs(responses[0])["EMBEDDING"].tolist() == [[14.0, 4.0, 4.0], [47.0, 8.0, 8.0]]
    assert calls == [("toy_encoder", ["EMBEDDING"], [1, 4]), ("toy_encoder", ["EMBEDDING"], [1, 8])]


def test_a_failing_encoder_fails_the_good_requests_but_not_the_bad_ones(
    tmp_path: Path, pb_utils
) -> None:
    def broken(model: str, feeds, names):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError("no instance"))

    pb_utils.bls_handler = broken
    model = _model(tmp_path)  # no toy_encoder directory at all
    responses = model.execute(
        [request(_texts(b"hello")), request(_texts(b" ")), request(_texts(b"cat"))]
    )
    assert error_of(responses[0]) == (1, "RuntimeError: toy_encoder: no instance")
    # The bad request is told what is wrong with it, not about the encoder.
    assert error_of(responses[1]) == (
        3,
        "TEXT is whitespace only; send at least one non-space character",
    )
    assert error_of(responses[2]) == (1, "RuntimeError: toy_encoder: no instance")


def test_profiling_names_the_encoder_phase(tmp_path: Path, pb_utils, monkeypatch) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "1" / "model.onnx")
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path))
    model = _model(tmp_path)
    model.execute([request(_texts(b"hello", b"the cats the cats world"))])
    assert sorted(model.profile.seconds) == [
        "encoder_run",
        "execute",
        "process_batch",
        "read_inputs",
        "responses",
    ]


def _session_of(model: BertEmbeddingModel):
    """The InferenceSession the in-process encoder closes over."""
    import onnxruntime as ort

    cells = [cell.cell_contents for cell in model.encoder.__closure__ or ()]
    (session,) = [c for c in cells if isinstance(c, ort.InferenceSession)]
    return session


def test_the_in_process_session_takes_the_thread_parameters(tmp_path: Path, pb_utils) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "1" / "model.onnx")
    options = _session_of(_model(tmp_path)).get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    config = _config(intra_op_thread_count="3", inter_op_thread_count="2")
    options = _session_of(_model(tmp_path, config)).get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (3, 2)


def test_session_settings_default_to_one_thread_each() -> None:
    assert encoder_session_settings(ModelParameters({})) == SessionSettings(1, 1)
    params = ModelParameters(
        {"intra_op_thread_count": "3", "inter_op_thread_count": "2", "session.x": "y"}
    )
    assert encoder_session_settings(params) == SessionSettings(3, 2, False, {"session.x": "y"})


def test_torch_is_importable_here_and_its_absence_is_seen(monkeypatch) -> None:
    assert bert._torch_imports() is True
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` fails on
    assert bert._torch_imports() is False


def _torchscript(path: Path) -> Path:
    """The toy encoder as TorchScript (what ``--engine torch`` puts in the sibling)."""
    import torch

    class Toy(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            width = torch.full_like(attention_mask[:, 0], input_ids.shape[1])
            columns = [(input_ids * attention_mask).sum(1), attention_mask.sum(1), width]
            return torch.stack(columns, 1).float()

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.script(Toy()).save(str(path))
    return path


CPU_SIBLING = 'name: "toy_encoder"\ninstance_group { kind: KIND_CPU }\n'
GRAPH_SPEC = (
    'name: "toy_encoder"\noptimization { cuda { graphs: true graph_spec { batch_size: 2 '
    'input { key: "input_ids" value { dim: [6] } } } } }\n'
)


def test_a_torchscript_sibling_runs_in_process_on_its_device(
    tmp_path: Path, pb_utils, monkeypatch, caplog
) -> None:
    import torch

    script = _torchscript(tmp_path / "toy_encoder" / "1" / "model.pt")
    (tmp_path / "toy_encoder" / "config.pbtxt").write_text(CPU_SIBLING)
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path))
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with caplog.at_level(logging.INFO, logger="python_models"):
            model = _model(tmp_path, _config(intra_op_thread_count="2", cuda_graphs="true"))
        assert torch.get_num_threads() == 2
        torch.set_num_threads(3)
        _model(tmp_path)
        assert torch.get_num_threads() == 1  # intra_op_thread_count's default
    finally:
        torch.set_num_threads(threads)
    (message,) = [r.getMessage() for r in caplog.records if "in-process" in r.getMessage()]
    # CUDA graphs are asked for, but the device is the CPU: none.
    prefix = f"bert: encoder {script} in-process on cpu; 0 CUDA graphs (batch, length) in "
    assert message.startswith(prefix) and message.endswith(" s: []")
    assert 0.0 <= float(message[len(prefix) : -len(" s: []")]) < 30.0
    responses = model.execute([request(_texts(b"hello world", b"the cats the cats world"))])
    assert outputs(responses[0])["EMBEDDING"].tolist() == [[14.0, 4.0, 4.0], [47.0, 8.0, 8.0]]
    assert "encoder_eager" in model.profile.seconds


def test_graph_pairs_follow_the_sibling_or_the_parameter(tmp_path: Path, pb_utils) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "1" / "model.onnx")
    config = tmp_path / "toy_encoder" / "config.pbtxt"
    config.write_text(CPU_SIBLING)
    assert _model(tmp_path)._graph_pairs("toy_encoder") == []
    wanted = _model(tmp_path, _config(max_batch_size=4, cuda_graphs="true"))
    # buckets (4, 6, 8) x batch buckets of 4 (1, 2, 4), longest then largest first
    assert wanted._graph_pairs("toy_encoder") == [
        (4, 8), (2, 8), (1, 8), (4, 6), (2, 6), (1, 6), (4, 4), (2, 4), (1, 4)
    ]  # fmt: skip
    unbatched = _model(tmp_path, _config(max_batch_size=0, cuda_graphs="true"))
    assert unbatched._graph_pairs("toy_encoder") == [(1, 8), (1, 6), (1, 4)]
    config.write_text(GRAPH_SPEC)
    assert _model(tmp_path)._graph_pairs("toy_encoder") == [(2, 6)]


def test_an_unreadable_sibling_config_is_warned_about(
    tmp_path: Path, pb_utils, monkeypatch, caplog
) -> None:
    _encoder_onnx(tmp_path / "toy_encoder" / "1" / "model.onnx")
    (tmp_path / "toy_encoder" / "config.pbtxt").write_text(GRAPH_SPEC)
    model = _model(tmp_path, _config(max_batch_size=2, cuda_graphs="true"))
    monkeypatch.setitem(sys.modules, "tritonclient.grpc", None)  # no tritonclient[grpc]
    with caplog.at_level(logging.WARNING, logger="python_models"):
        pairs = model._graph_pairs("toy_encoder")
    assert pairs == [(2, 8), (1, 8), (2, 6), (1, 6), (2, 4), (1, 4)]  # the default grid
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == (
        "bert: cannot read toy_encoder's graph_spec "
        "(import of tritonclient.grpc halted; None in sys.modules)"
    )
    without_parameter = _model(tmp_path)
    assert without_parameter._graph_pairs("toy_encoder") == []
