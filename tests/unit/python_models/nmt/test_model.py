"""``triton_kit.python_models.nmt.model`` (the BLS search model) without a server.

The text side is the real sentencepiece model and vocabulary of assets/nmt-en-fr-numbers.
The encoder and decoder are the sibling models, called through BLS (no ONNX file beside
them) behind tests/support/pb_utils_standin.py, played by a *copy* model: the encoder hands the
source ids over as its cross state and the decoder's step ``t`` puts all its probability
on source token ``t``. Greedy or beam, the translation of a text is then the text itself
("seven hundred" is ▁seven ▁hundred </s>), and ``MAX_LENGTH`` 3 (start token + 2) keeps
its first piece and the forced ``</s>``: expected values need no model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support import pb_utils_standin as standin
from tests.support.pb_utils_standin import error_of, outputs, request
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.python_models.common.base import PROFILE_DIR_ENV, InvalidInput
from triton_kit.python_models.nmt import model as nmt
from triton_kit.python_models.nmt.model import (
    BlsStepModel,
    NmtModel,
    _decode_text,
    _per_row,
    parse_rows,
)
from triton_kit.python_models.nmt.settings import Limits
from triton_kit.python_models.nmt.text import MarianText

EOS, PAD, VOCAB = 0, 139, 140  # the checkpoint's </s>, <pad> (decoder start) and vocab size
FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL

PARAMETERS = {
    "decoder_start_token_id": "139",
    "eos_token_id": "0",
    "pad_token_id": "139",
    "suppressed_token_ids": "",
    "forced_eos": "true",
    "length_penalty": "1.0",
    "early_stopping": "false",
    "decoder_layers": "1",
    "decoder_heads": "1",
    "head_dim": "1",
    "default_beam_size": "2",
    "max_beam_size": "4",
    "default_max_length": "16",
    "max_target_length": "20",
    "max_source_length": "32",
    "encoder_model": "copy_encoder",
    "decoder_model": "copy_decoder",
}


class CopyModel:
    """The BLS handler: ``copy_encoder`` and ``copy_decoder`` as described above."""

    def __init__(self, pb_utils, fail_at_step: int | None = None) -> None:
        self.pb_utils, self.fail_at_step = pb_utils, fail_at_step
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, model: str, feeds: dict[str, np.ndarray], names: list[str]):
        self.calls.append((model, names))
        Tensor = self.pb_utils.Tensor
        if model == "copy_encoder":
            ids = feeds["input_ids"].astype(np.float32)  # [batch, src_len]
            return self.pb_utils.InferenceResponse([Tensor("cross_kv", ids[None, None, :, None])])
        past = feeds["past_kv"]
        step = past.shape[4]
        if step == self.fail_at_step:
            return self.pb_utils.InferenceResponse(error=self.pb_utils.TritonError("decoder down"))
        source = feeds["cross_kv"][0, 0, :, 0].astype(np.int64)  # [rows, src_len]
        target = source[:, step] if step < source.shape[1] else np.full(len(source), EOS)
        logits = np.full((len(source), VOCAB), -20.0, dtype=np.float32)
        logits[np.arange(len(source)), target] = 20.0
        grown = np.concatenate([past, np.zeros((*past.shape[:4], 1, 1), np.float32)], axis=4)
        return self.pb_utils.InferenceResponse(
            [Tensor("logits", logits), Tensor("present_kv", grown)]
        )


def _config(**parameters: str) -> dict:
    values = {**PARAMETERS, **parameters}
    return {
        "name": "nmt",
        "max_batch_size": 32,
        "input": [
            {"name": "TEXT", "data_type": "TYPE_STRING", "dims": [1]},
            {"name": "BEAM_SIZE", "data_type": "TYPE_INT32", "dims": [1], "optional": True},
            {"name": "MAX_LENGTH", "data_type": "TYPE_INT32", "dims": [1], "optional": True},
        ],
        "output": [{"name": "TRANSLATION", "data_type": "TYPE_STRING", "dims": [1]}],
        "parameters": {k: {"string_value": v} for k, v in values.items()},
    }


@pytest.fixture
def pb_utils(monkeypatch):
    monkeypatch.delenv(PROFILE_DIR_ENV, raising=False)
    return standin.install(
        monkeypatch,
        "triton_kit.python_models.common.base",
        "triton_kit.python_models.common.bls",
        "triton_kit.python_models.nmt.model",
    )


def _model(tmp_path: Path, **parameters: str) -> NmtModel:
    version_dir = tmp_path / "nmt" / "1"
    version_dir.mkdir(parents=True)
    for name in ("source.spm", "vocab.json"):
        shutil.copy(DEFAULT_CHECKPOINT / name, version_dir / name)
    model = NmtModel()
    model.initialize(
        {
            "model_config": json.dumps(_config(**parameters)),
            "model_name": "nmt",
            "model_repository": str(tmp_path / "nmt"),
            "model_version": "1",
        }
    )
    return model


def _request(texts: list[str], beam: list[int] | None = None, length: list[int] | None = None):
    inputs = {"TEXT": np.array([[t.encode()] for t in texts], dtype=np.object_)}
    if beam is not None:
        inputs["BEAM_SIZE"] = np.array([[b] for b in beam], dtype=np.int32)
    if length is not None:
        inputs["MAX_LENGTH"] = np.array([[n] for n in length], dtype=np.int32)
    return request(inputs)


def _only_response(req) -> object:
    ((response, flags),) = req.sender.sent
    assert flags == FINAL
    return response


def test_setup_reads_the_parameters_and_falls_back_to_bls(tmp_path: Path, pb_utils) -> None:
    model = _model(tmp_path)
    assert isinstance(model.runner, BlsStepModel)
    assert (model.runner.encoder, model.runner.decoder) == ("copy_encoder", "copy_decoder")
    assert model.limits.max_source_length == 32
    assert model.text.max_source_length == 32
    assert model.settings.decoder_start_token_id == PAD


def test_setup_defaults_name_the_nmt_siblings(tmp_path: Path, pb_utils) -> None:
    parameters = {k: v for k, v in PARAMETERS.items() if not k.endswith("_model")}
    model = NmtModel()
    version_dir = tmp_path / "nmt" / "1"
    version_dir.mkdir(parents=True)
    for name in ("source.spm", "vocab.json"):
        shutil.copy(DEFAULT_CHECKPOINT / name, version_dir / name)
    config = _config()
    config["parameters"] = {k: {"string_value": v} for k, v in parameters.items()}
    model.initialize(
        {
            "model_config": json.dumps(config),
            "model_name": "nmt",
            "model_repository": str(tmp_path / "nmt"),
            "model_version": "1",
        }
    )
    assert (model.runner.encoder, model.runner.decoder) == ("nmt_encoder", "nmt_decoder")


def test_each_request_gets_its_translation_and_bad_ones_fail_alone(tmp_path, pb_utils) -> None:
    copy = CopyModel(pb_utils)
    pb_utils.bls_handler = copy
    model = _model(tmp_path)
    greedy = _request(["seven hundred"], beam=[1])
    bad_beam = _request(["zero"], beam=[5])
    two_rows = _request(["twelve", "four hundred and one"], beam=[2], length=[20, 3])
    default = _request(["zero"])
    not_utf8 = request({"TEXT": np.array([[b"\xc3("]], dtype=np.object_)})
    assert model.execute([greedy, bad_beam, two_rows, default, not_utf8]) is None
    assert outputs(_only_response(greedy))["TRANSLATION"].tolist() == [[b"seven hundred"]]
    assert error_of(_only_response(bad_beam)) == (3, "BEAM_SIZE must be in 1..4, got 5")
    assert outputs(_only_response(two_rows))["TRANSLATION"].tolist() == [[b"twelve"], [b"four"]]
    assert outputs(_only_response(default))["TRANSLATION"].tolist() == [[b"zero"]]
    assert error_of(_only_response(not_utf8)) == (
        3,
        "TEXT is not valid UTF-8 (invalid continuation byte at byte 0)",
    )
    assert copy.calls[0] == ("copy_encoder", ["cross_kv"])
    assert all(call == ("copy_decoder", ["logits", "present_kv"]) for call in copy.calls[1:])
    assert len(copy.calls) > 1
    assert [model for model, _ in copy.calls].count("copy_encoder") == 1  # one per execute


def test_a_failing_decoder_fails_the_unanswered_requests_only(tmp_path, pb_utils) -> None:
    pb_utils.bls_handler = CopyModel(pb_utils, fail_at_step=3)
    model = _model(tmp_path)
    short = _request(["four hundred"], beam=[1], length=[3])  # done after steps 0 and 1
    long = _request(["four hundred and one"], beam=[1])
    bad = _request(["   "])
    model.execute([short, long, bad])
    assert outputs(_only_response(short))["TRANSLATION"].tolist() == [[b"four"]]
    assert error_of(_only_response(long)) == (1, "RuntimeError: copy_decoder: decoder down")
    assert error_of(_only_response(bad)) == (3, "TEXT is empty")


def test_the_response_goes_out_as_soon_as_a_request_is_done(tmp_path, pb_utils) -> None:
    copy = CopyModel(pb_utils)
    pb_utils.bls_handler = copy
    model = _model(tmp_path)
    long = _request(["four hundred and one"], beam=[1])
    short = _request(["zero"], beam=[1])
    steps_when_sent: dict[str, int] = {}
    for name, req in (("long", long), ("short", short)):
        sender = req.sender

        def send(response, flags=0, _name=name, _send=sender.send):
            steps_when_sent[_name] = len(copy.calls) - 1
            _send(response, flags)

        sender.send = send
    model.execute([long, short])
    # "zero" is ▁zero </s>: done after 2 decoder steps; the long one after 5.
    assert steps_when_sent == {"short": 2, "long": 5}


class CopyGenerate:
    """The BLS handler for a TorchScript ``copy_generate``: each row's ids are its source ids
    (EOS included), so a translation is its text; ``fail`` answers with an error."""

    def __init__(self, pb_utils, fail: bool = False) -> None:
        self.pb_utils, self.fail = pb_utils, fail
        self.beams: list[int] = []

    def __call__(self, model: str, feeds: dict[str, np.ndarray], names: list[str]):
        self.beams.append(int(feeds["num_beams"][0, 0]))
        if self.fail:
            return self.pb_utils.InferenceResponse(error=self.pb_utils.TritonError("engine down"))
        sequences = self.pb_utils.Tensor(names[0], feeds["input_ids"].copy())
        return self.pb_utils.InferenceResponse([sequences])


def _engine_model(tmp_path: Path, pb_utils, handler: CopyGenerate) -> NmtModel:
    """The nmt model of an engine-search build: a TorchScript sibling ``copy_generate``."""
    (tmp_path / "copy_generate" / "1").mkdir(parents=True)
    (tmp_path / "copy_generate" / "1" / "model.pt").write_bytes(b"")
    pb_utils.bls_handler = handler
    return _model(tmp_path, generate_model="copy_generate")


def test_an_engine_batch_of_one_beam_size_returns_its_responses(tmp_path, pb_utils) -> None:
    """One engine call ends every sentence at once: the responses are execute's return (one
    message to Triton), none goes through a response sender; a bad request fails alone."""
    engine = CopyGenerate(pb_utils)
    model = _engine_model(tmp_path, pb_utils, engine)
    first, bad, second = _request(["seven hundred"]), _request(["   "]), _request(["zero", "one"])
    responses = model.execute([first, bad, second])
    assert engine.beams == [2]  # the default beam size, one call
    assert outputs(responses[0])["TRANSLATION"].tolist() == [[b"seven hundred"]]
    assert error_of(responses[1]) == (3, "TEXT is empty")
    assert outputs(responses[2])["TRANSLATION"].tolist() == [[b"zero"], [b"one"]]
    assert not any(req.sender.sent for req in (first, bad, second))


def test_an_engine_batch_of_two_beam_sizes_answers_as_each_call_returns(tmp_path, pb_utils):
    """Smaller beams first; each request's response goes out when its beam size's call
    returns (a greedy request does not wait for the beam search)."""
    engine = CopyGenerate(pb_utils)
    model = _engine_model(tmp_path, pb_utils, engine)
    greedy, beam = _request(["zero"], beam=[1]), _request(["seven hundred"], beam=[4])
    calls_when_sent: dict[str, int] = {}
    for name, req in (("greedy", greedy), ("beam", beam)):

        def send(response, flags=0, _name=name, _send=req.sender.send):
            calls_when_sent[_name] = len(engine.beams)
            _send(response, flags)

        req.sender.send = send
    assert model.execute([beam, greedy]) is None
    assert engine.beams == [1, 4] and calls_when_sent == {"greedy": 1, "beam": 2}
    assert outputs(_only_response(greedy))["TRANSLATION"].tolist() == [[b"zero"]]
    assert outputs(_only_response(beam))["TRANSLATION"].tolist() == [[b"seven hundred"]]


def test_a_failing_engine_fails_every_returned_response(tmp_path, pb_utils) -> None:
    model = _engine_model(tmp_path, pb_utils, CopyGenerate(pb_utils, fail=True))
    good, bad = _request(["zero"]), _request(["   "])
    responses = model.execute([good, bad])
    assert error_of(responses[0]) == (1, "RuntimeError: copy_generate: engine down")
    assert error_of(responses[1]) == (3, "TEXT is empty")


class CopyCt2:
    """The BLS handler for the kit's ctranslate2 backend (``copy_ct2``): each row's target ids
    are its source ids (-1 padded, as the backend pads), so a translation is its text."""

    def __init__(self, pb_utils) -> None:
        self.pb_utils = pb_utils
        self.beams: list[list[int]] = []

    def __call__(self, model: str, feeds: dict[str, np.ndarray], names: list[str]):
        self.beams.append(feeds["BEAM_SIZE"].reshape(-1).tolist())
        target = self.pb_utils.Tensor(names[0], feeds["SOURCE_IDS"].copy())
        return self.pb_utils.InferenceResponse([target])


def test_a_ct2_batch_of_two_beam_sizes_is_one_call_and_returns_its_responses(tmp_path, pb_utils):
    """The ctranslate2 backend takes every row's beam size in one call, so a batch mixing beam
    sizes is answered by execute's return too (one message to Triton, no response sender);
    a bad request still fails alone."""
    (tmp_path / "copy_ct2" / "1").mkdir(parents=True)
    (tmp_path / "copy_ct2" / "1" / "model.bin").write_bytes(b"")
    engine = CopyCt2(pb_utils)
    pb_utils.bls_handler = engine
    model = _model(tmp_path, generate_model="copy_ct2")
    greedy, bad = _request(["zero"], beam=[1]), _request(["zero"], beam=[5])
    beam = _request(["seven hundred", "one"], beam=[4])
    responses = model.execute([greedy, bad, beam])
    assert engine.beams == [[1, 4, 4]]  # ONE call, each row its own beam size
    assert outputs(responses[0])["TRANSLATION"].tolist() == [[b"zero"]]
    assert error_of(responses[1]) == (3, "BEAM_SIZE must be in 1..4, got 5")
    assert outputs(responses[2])["TRANSLATION"].tolist() == [[b"seven hundred"], [b"one"]]
    assert not any(req.sender.sent for req in (greedy, bad, beam))


def _limits(**changes: int) -> Limits:
    values = dict(
        default_beam_size=2,
        max_beam_size=4,
        default_max_length=16,
        max_target_length=20,
        max_source_length=32,
        max_text_bytes=20,
        max_beam_tokens=80,
    )
    return Limits(**{**values, **changes})


@pytest.fixture(scope="module")
def text() -> MarianText:
    return MarianText(DEFAULT_CHECKPOINT, 32)


def _inputs(texts: list[object], beam=None, length=None) -> dict[str, np.ndarray]:
    inputs = {"TEXT": np.array([[t] for t in texts], dtype=np.object_)}
    if beam is not None:
        inputs["BEAM_SIZE"] = np.array(beam, dtype=np.int32)
    if length is not None:
        inputs["MAX_LENGTH"] = np.array(length, dtype=np.int32)
    return inputs


def test_parse_rows_accepts_the_edges(text) -> None:
    # 1 x 2 + 4 x 20 = 82 = max_beam_tokens
    edges = _inputs([b"zero", "twelve"], [[1], [4]], [[2], [20]])
    jobs = parse_rows(edges, text, _limits(max_beam_tokens=82))
    assert [(list(j.source_ids), j.beam_size, j.max_length) for j in jobs] == [
        ([44, 0], 1, 2),
        ([39, 0], 4, 20),
    ]
    # 2 rows x 2 x 20 = 80 = max_beam_tokens; 20 bytes = max_text_bytes
    jobs = parse_rows(_inputs([b"x" * 20, b"zero"], length=[[20]]), text, _limits())
    assert [(j.beam_size, j.max_length) for j in jobs] == [(2, 20), (2, 20)]
    assert type(jobs[0].beam_size) is int and type(jobs[0].max_length) is int


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (_inputs([b"zero"], [0]), "BEAM_SIZE must be in 1..4, got 0"),
        (_inputs([b"zero"], [5]), "BEAM_SIZE must be in 1..4, got 5"),
        (
            _inputs([b"zero"], None, [1]),
            "MAX_LENGTH must be in 2..20 (it counts the decoder start token), got 1",
        ),
        (
            _inputs([b"zero"], None, [21]),
            "MAX_LENGTH must be in 2..20 (it counts the decoder start token), got 21",
        ),
        (_inputs([b"x" * 21]), "TEXT is 21 bytes; the limit is 20 bytes"),
        (_inputs(["é" * 11]), "TEXT is 22 bytes; the limit is 20 bytes"),
        (
            _inputs([b"zero", b"one", b"two"], None, [[14]]),
            "rows x BEAM_SIZE x MAX_LENGTH is 84; the limit is 80 per request: split the "
            "request or lower BEAM_SIZE/MAX_LENGTH",
        ),
        (_inputs([b"zero", b"one", b"two"], [1, 2]), "expected 3 values, one per TEXT row, got 2"),
        (_inputs([b"\xffzero"]), "TEXT is not valid UTF-8 (invalid start byte at byte 0)"),
        (_inputs([b" \t "]), "TEXT is empty"),
        (_inputs([""]), "TEXT is empty"),
    ],
)
def test_parse_rows_refuses_with_the_reason(text, inputs, message) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_rows(inputs, text, _limits())
    assert str(info.value) == message


def test_per_row_values() -> None:
    assert _per_row(None, 3, 7) == [7, 7, 7]
    assert _per_row(np.array([[5]]), 2, 7) == [5, 5]
    assert _per_row(np.array([[1], [3]]), 2, 7) == [1, 3]
    assert all(type(v) is int for v in _per_row(np.array([[1], [3]], np.int32), 2, 7))


def test_decode_text_takes_str_and_bytes() -> None:
    assert _decode_text(b"caf\xc3\xa9") == "café"
    assert _decode_text("café") == "café"
    assert _decode_text(np.str_(" un ")) == " un "


def test_bls_step_model_feeds_and_outputs(pb_utils) -> None:
    seen: list[tuple[str, dict, list[str]]] = []

    def handler(model, feeds, names):
        seen.append((model, {k: v.tolist() for k, v in feeds.items()}, names))
        tensors = [pb_utils.Tensor(n, np.full(1, i, np.float32)) for i, n in enumerate(names)]
        return pb_utils.InferenceResponse(list(reversed(tensors)))

    pb_utils.bls_handler = handler
    runner = BlsStepModel("enc", "dec")
    ids, mask = np.array([[4, 0]]), np.array([[1, 1]])
    assert runner.encode(ids, mask).tolist() == [0.0]
    logits, present = runner.step(ids, mask, np.ones(1), np.zeros(1))
    assert (logits.tolist(), present.tolist()) == ([0.0], [1.0])
    runner.step(ids, mask, np.ones(1), np.zeros(1), np.array([0]))
    assert seen.pop()[1]["beam_index"] == [0]
    assert seen == [
        ("enc", {"input_ids": [[4, 0]], "attention_mask": [[1, 1]]}, ["cross_kv"]),
        (
            "dec",
            {
                "input_ids": [[4, 0]],
                "encoder_attention_mask": [[1, 1]],
                "cross_kv": [1.0],
                "past_kv": [0.0],
            },
            ["logits", "present_kv"],
        ),
    ]


def test_step_model_prefers_the_siblings_onnx_files(tmp_path: Path, nmt_python_search) -> None:
    built = nmt_python_search
    repository = tmp_path / "repo"
    for name in ("nmt_encoder", "nmt_decoder"):
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "1" / "model.onnx").symlink_to(built / name / "1" / "model.onnx")
    version_dir = repository / "nmt" / "1"
    runner = nmt.step_model(version_dir, "nmt_encoder", "nmt_decoder", 3)
    from triton_kit.python_models.nmt.decode import candidates_of, row_candidates
    from triton_kit.python_models.nmt.ort import OrtStepModel

    assert type(runner) is OrtStepModel and runner.reorders  # the graph has beam_index
    # Each row's best tokens in ONNX Runtime, as in process (not numpy over [rows, vocab]).
    assert candidates_of(runner) is not row_candidates
    for session in (runner.encoder, runner.decoder):
        assert session.get_session_options().intra_op_num_threads == 3
    assert "nmt_encoder" in runner.encoder._model_path
    assert "nmt_decoder" in runner.decoder._model_path
    # One of the two without an ONNX file: both through BLS.
    (repository / "nmt_decoder" / "1" / "model.onnx").unlink()
    runner = nmt.step_model(version_dir, "nmt_encoder", "nmt_decoder", 3)
    assert type(runner) is BlsStepModel and not runner.reorders  # no config names beam_index
    assert (runner.encoder, runner.decoder) == ("nmt_encoder", "nmt_decoder")
    config = (built / "nmt_decoder" / "config.pbtxt").read_text()
    (repository / "nmt_decoder" / "config.pbtxt").write_text(config)  # a plan's would name it
    assert nmt.step_model(version_dir, "nmt_encoder", "nmt_decoder", 3).reorders
    # One TorchScript file alone does not make a torch step model.
    (repository / "nmt_encoder" / "1" / "model.pt").write_bytes(b"")
    assert type(nmt.step_model(version_dir, "nmt_encoder", "nmt_decoder", 3)) is BlsStepModel


def _torch_copy_model(repository: Path) -> None:
    """The copy model as the two TorchScript files ``--engine torch`` builds."""
    import torch

    class Encoder(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
            cross = (input_ids * attention_mask).float()[None, None, :, None, :, None]
            return input_ids.float(), cross

    class Decoder(torch.nn.Module):
        def forward(self, input_ids, encoder_attention_mask, cross_kv, past_kv, beam_index):
            step = past_kv.shape[4]
            source = cross_kv[0, 0, :, 0, :, 0].long()
            last = torch.zeros_like(source[:, 0])  # </s> once the source is copied
            target = source[:, step] if step < source.shape[1] else last
            logits = torch.full((source.shape[0], 140), -20.0)
            logits[torch.arange(source.shape[0]), target] = 20.0
            rows, heads = beam_index.shape[0], past_kv.shape[3]
            pad = torch.zeros(past_kv.shape[0], 2, rows, heads, 1, past_kv.shape[5])
            grown = torch.cat([past_kv.index_select(2, beam_index), pad], 4)
            return logits, grown

    for name, module in (("copy_encoder", Encoder()), ("copy_decoder", Decoder())):
        (repository / name / "1").mkdir(parents=True)
        torch.jit.script(module).save(str(repository / name / "1" / "model.pt"))
    (repository / "copy_encoder" / "config.pbtxt").write_text("instance_group { kind: KIND_CPU }")


def test_torchscript_siblings_run_in_process_on_their_device(tmp_path: Path, pb_utils) -> None:
    import torch

    from triton_kit.python_models.nmt.torch_steps import TorchStepModel

    _torch_copy_model(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        model = _model(tmp_path, intra_op_thread_count="2")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert type(model.runner) is TorchStepModel
    assert model.runner.device == torch.device("cpu")
    requests = [_request(["four hundred and one"], beam=[1]), _request(["zero"], beam=[2])]
    model.execute(requests)
    assert outputs(_only_response(requests[0]))["TRANSLATION"].tolist() == [
        [b"four hundred and one"]
    ]
    assert outputs(_only_response(requests[1]))["TRANSLATION"].tolist() == [[b"zero"]]


def test_in_process_sessions_take_the_thread_parameter(
    tmp_path: Path, pb_utils, nmt_python_search
) -> None:
    for name in ("copy_encoder", "copy_decoder"):
        (tmp_path / name / "1").mkdir(parents=True)
        source = nmt_python_search / f"nmt_{name.split('_')[1]}" / "1" / "model.onnx"
        (tmp_path / name / "1" / "model.onnx").symlink_to(source)
    model = _model(tmp_path)
    for session in (model.runner.encoder, model.runner.decoder):
        assert session.get_session_options().intra_op_num_threads == 1
    shutil.rmtree(tmp_path / "nmt")
    model = _model(tmp_path, intra_op_thread_count="2")
    assert model.runner.decoder.get_session_options().intra_op_num_threads == 2


def test_a_profiled_search_reports_its_phases(tmp_path, pb_utils, monkeypatch) -> None:
    """TRITON_KIT_PROFILE_DIR splits the execute into the search's phases (where the served
    search's time goes on the GPU); answers are unchanged."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    monkeypatch.setenv(PROFILE_DIR_ENV, str(profiles))
    pb_utils.bls_handler = CopyModel(pb_utils)
    model = _model(tmp_path)
    greedy, beam = _request(["seven hundred"], beam=[1]), _request(["twelve"], beam=[2])
    assert model.execute([greedy, beam]) is None
    assert outputs(_only_response(greedy))["TRANSLATION"].tolist() == [[b"seven hundred"]]
    assert outputs(_only_response(beam))["TRANSLATION"].tolist() == [[b"twelve"]]
    seconds = model.profile.seconds
    assert {"parse", "search", "answer", "encode", "step", "execute"} <= set(seconds)
    assert seconds["execute"] >= seconds["search"] >= seconds["step"] + seconds["answer"]
    assert (model.profile.executes, model.profile.requests) == (1, 2)
    model.finalize()
    (written,) = profiles.glob("nmt-*.json")
    assert json.loads(written.read_text())["requests"] == 2
