"""``triton_kit.python_models.nmt.text`` and ``triton_kit.python_models.nmt.ort`` without a server.

Token ids are read off assets/nmt-en-fr-numbers/vocab.json by hand (``</s>`` 0, ``<unk>`` 1,
``<pad>`` 139, ``▁four`` 15, ``▁hundred`` 3, ``▁and`` 2, ``▁one`` 8); "b" is not in that
vocabulary. The IO-binding path of ``nmt_ort`` is checked against ONNX Runtime's plain
``run`` on the built decoder, the reference that binding must not change.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.python_models.nmt.ort import OrtStepModel, SessionStepModel, _run_bound, session
from triton_kit.python_models.nmt.text import TARGET_VOCAB, MarianText


@pytest.fixture(scope="module")
def text() -> MarianText:
    return MarianText(DEFAULT_CHECKPOINT, 128)


def test_special_ids_come_from_the_vocabulary(text) -> None:
    assert (text.eos_id, text.unk_id, text.pad_id) == (0, 1, 139)
    assert text.special == {0, 1, 139}
    assert TARGET_VOCAB == "target_vocab.json"


def test_encode_appends_eos_and_maps_unknown_pieces_to_unk(text) -> None:
    assert text.encode("four hundred and one") == [15, 3, 2, 8, 0]
    # ▁ z e b r a: "b" is no piece of vocab.json
    assert text.encode("zebra") == [33, 63, 77, 1, 73, 72, 0]


@pytest.mark.parametrize(("limit", "ids"), [(5, [15, 3, 2, 8, 0]), (3, [15, 3, 0]), (1, [0])])
def test_encode_truncates_to_max_source_length_eos_included(limit, ids) -> None:
    assert MarianText(DEFAULT_CHECKPOINT, limit).encode("four hundred and one") == ids


def test_decode_drops_special_and_unknown_ids_and_restores_spaces(text) -> None:
    assert text.decode([139, 15, 3, 1, 2, 8, 0, 0]) == "four hundred and one"
    assert text.decode([15, 9999, 3]) == "four hundred"
    assert text.decode([-1, 15, -139, 3, 140]) == "four hundred"  # ids outside the table
    assert text.decode([]) == ""


def test_separate_target_vocabulary(tmp_path: Path) -> None:
    for name in ("source.spm", "vocab.json"):
        shutil.copy(DEFAULT_CHECKPOINT / name, tmp_path / name)
    target = {"</s>": 0, "▁un": 1, "▁deux": 2, "<pad>": 5, "\u2581x\u2581y": 6}  # no <unk>
    (tmp_path / TARGET_VOCAB).write_text(json.dumps(target), "utf-8")
    text = MarianText(tmp_path, 16)
    assert text.special == {0, 5}
    assert (text.eos_id, text.unk_id, text.pad_id) == (0, 1, 139)  # from the source side
    assert text.decode([5, 1, 2, 6, 3, 0]) == "un deux x y"
    assert text.encode("four hundred") == [15, 3, 0]


class Recorder:
    """An object with ONNX Runtime's ``run(None, feeds)`` that returns three outputs."""

    def __init__(self) -> None:
        self.feeds: list[dict] = []

    def run(self, names, feeds):
        assert names is None
        self.feeds.append(feeds)
        return [np.array([0.0]), np.array([1.0]), np.array([2.0])]


def test_session_step_model_over_objects_that_run() -> None:
    encoder, decoder = Recorder(), Recorder()
    model = SessionStepModel(encoder, decoder)
    ids, mask = np.array([[15, 0]]), np.array([[1, 1]])
    assert model.encode(ids, mask).tolist() == [1.0]  # cross_kv: the encoder's second output
    logits, present = model.step(ids, mask, np.array([3.0]), np.array([4.0]))
    assert (logits.tolist(), present.tolist()) == ([0.0], [1.0])
    assert list(encoder.feeds[0]) == ["input_ids", "attention_mask"]
    assert encoder.feeds[0]["input_ids"] is ids and encoder.feeds[0]["attention_mask"] is mask
    assert list(decoder.feeds[0]) == ["input_ids", "encoder_attention_mask", "cross_kv", "past_kv"]
    assert decoder.feeds[0]["cross_kv"].tolist() == [3.0]
    assert decoder.feeds[0]["past_kv"].tolist() == [4.0]


@pytest.fixture(scope="module")
def onnx_files(nmt_python_search: Path) -> tuple[Path, Path]:
    return tuple(
        nmt_python_search / name / "1" / "model.onnx" for name in ("nmt_encoder", "nmt_decoder")
    )


def test_session_threads(onnx_files) -> None:
    options = session(onnx_files[0], 3).get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (3, 1)
    model = OrtStepModel(*onnx_files)
    for created in (model.encoder, model.decoder):
        assert isinstance(created, ort.InferenceSession)
        assert created.get_session_options().intra_op_num_threads == 2
    assert "nmt_encoder" in model.encoder._model_path
    assert "nmt_decoder" in model.decoder._model_path
    assert (
        OrtStepModel(*onnx_files, threads=1).decoder.get_session_options().intra_op_num_threads == 1
    )


def test_bound_step_equals_a_plain_run(onnx_files, text) -> None:
    model = OrtStepModel(*onnx_files, threads=1)
    ids = np.array([text.encode("four hundred and one"), text.encode("one") + [139] * 3])
    mask = (ids != 139).astype(np.int64)
    cross = model.encode(ids, mask)
    plain_cross = model.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[1]
    assert np.array_equal(cross, plain_cross)
    past = np.zeros((3, 2, 2, 4, 0, 32), dtype=np.float32)
    start = np.full((2, 1), 139, dtype=np.int64)
    rows = np.arange(2)
    feed = {"input_ids": start, "encoder_attention_mask": mask, "cross_kv": cross, "past_kv": past}
    feed["beam_index"] = rows
    expected_logits, expected_present = model.decoder.run(None, feed)[:2]
    logits, present = model.step(start, mask, cross, past, rows)
    assert logits.shape == (2, 140) and present.shape == (3, 2, 2, 4, 1, 32)
    assert np.array_equal(logits, expected_logits)
    assert np.array_equal(present, expected_present)
    # A second step on a non-contiguous view of the grown cache reads the same values.
    strided = np.concatenate([present, present], axis=4)[:, :, :, :, ::2]
    assert not strided.flags.c_contiguous
    nxt = np.array([[15], [8]], dtype=np.int64)
    feed2 = {**feed, "input_ids": nxt, "past_kv": np.ascontiguousarray(strided)}
    expected = model.decoder.run(None, feed2)[:2]
    got = _run_bound(model.decoder, {**feed2, "past_kv": strided})
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
