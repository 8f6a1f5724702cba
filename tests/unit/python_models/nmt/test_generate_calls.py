"""The ``nmt`` model's calls to ``nmt_generate`` (triton_kit/python_models/nmt/generate.py): to a
TorchScript one, one BLS call per beam size with that size's rows padded together; to the ONNX
graph, one call per batch; their padded ``sequences`` read back as HF ids. The called model is
tests/support/pb_utils_standin.py's handler here;
tests/integration/nmt/test_torch_generate_served.py serves the real one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import pb_utils_standin as standin
from triton_kit.python_models.nmt.decode import Job
from triton_kit.python_models.nmt.generate import (
    CT2_OUTPUT,
    TORCH_GENERATE_OUTPUT,
    generate_batched,
    generate_ct2,
    sequence_ids,
    served_search,
)

EOS, PAD = 0, 9


def test_sequence_ids_stop_at_eos_or_at_the_row_s_limit() -> None:
    assert sequence_ids([5, 6, EOS, PAD, PAD], 64, EOS) == [5, 6, EOS]
    assert sequence_ids([5, 6, 7, PAD, PAD], 4, EOS) == [5, 6, 7]  # cut: max_length - 1 ids
    assert sequence_ids(np.array([5, PAD, 7, PAD]), 4, EOS) == [5, PAD, 7]  # a generated pad
    assert sequence_ids([EOS, PAD], 2, EOS) == [EOS]


@pytest.fixture
def pb_utils(monkeypatch):
    return standin.install(monkeypatch, "triton_kit.python_models.common.bls")


def test_one_call_per_beam_size_with_its_rows_padded(pb_utils) -> None:
    calls = []

    def called(model, feeds, names):
        calls.append((model, {k: v.copy() for k, v in feeds.items()}, names))
        rows = feeds["input_ids"].shape[0]
        beam = int(feeds["num_beams"][0, 0])
        out = np.full((rows, 5), PAD, dtype=np.int64)
        out[:, 0] = beam  # the beam size, then the source length, then EOS
        out[:, 1] = feeds["attention_mask"].sum(axis=1)
        out[:, 2] = EOS
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(names[0], out)])

    pb_utils.bls_handler = called
    jobs = [Job([1, 2, 3], 4, 64), Job([1], 1, 10), Job([1, 2], 4, 3), Job([7, 7, 7, 7], 1, 64)]
    done = []
    results = generate_batched("gen", jobs, (EOS, PAD), lambda i, ids: done.append(i))
    assert results == [[4, 3, EOS], [1, 1, EOS], [4, 2], [1, 4, EOS]]  # job 2 cut at 3 - 1
    assert done == [1, 3, 0, 2]  # smaller beams first
    assert [c[0] for c in calls] == ["gen", "gen"] and calls[0][2] == [TORCH_GENERATE_OUTPUT]
    greedy, beam = calls[0][1], calls[1][1]
    assert greedy["input_ids"].tolist() == [[1, PAD, PAD, PAD], [7, 7, 7, 7]]
    assert greedy["attention_mask"].tolist() == [[1, 0, 0, 0], [1, 1, 1, 1]]
    assert greedy["num_beams"].tolist() == [[1], [1]]
    assert greedy["max_length"].tolist() == [[10], [64]]
    assert beam["num_beams"].tolist() == [[4], [4]] and beam["max_length"].tolist() == [[64], [3]]
    assert all(v.dtype == np.int64 for v in (*greedy.values(), *beam.values()))


def test_the_called_model_s_error_reaches_the_search(pb_utils) -> None:
    def failing(model, feeds, names):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError("out of memory"))

    pb_utils.bls_handler = failing
    with pytest.raises(RuntimeError, match="gen: out of memory"):
        generate_batched("gen", [Job([1], 1, 8)], (EOS, PAD))


def test_served_search_picks_the_torchscript_sibling_by_its_file(tmp_path, pb_utils) -> None:
    """A sibling with model.pt is called by BLS (its rows batched per beam size); else the
    ONNX graph (model.onnx), also by BLS: the whole batch in ONE call, mixed beams and limits
    included, a limit of 2 answered without it. No in-process session either way."""
    from triton_kit.python_models.nmt.decode import DecodeSettings

    settings = DecodeSettings(PAD, EOS, PAD, (1, 1, 1))
    version_dir = tmp_path / "nmt" / "1"
    version_dir.mkdir(parents=True)
    (tmp_path / "gen" / "1").mkdir(parents=True)
    (tmp_path / "gen" / "1" / "model.pt").write_bytes(b"")
    seen = []

    def called(model, feeds, names):
        seen.append(names)
        out = np.array([[3, EOS]] * feeds["input_ids"].shape[0], dtype=np.int64)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(names[0], out)])

    pb_utils.bls_handler = called
    search = served_search(version_dir, "gen", settings)
    assert search([Job([1], 2, 8), Job([2], 2, 8)], None) == [[3, EOS], [3, EOS]]
    assert seen == [[TORCH_GENERATE_OUTPUT]]
    (tmp_path / "gen" / "1" / "model.pt").unlink()
    (tmp_path / "gen" / "1" / "model.onnx").write_bytes(b"")
    feeds_seen = []

    def graph(model, feeds, names):  # the graph: [batch, longest] int32, start token first
        feeds_seen.append({k: v.copy() for k, v in feeds.items()})
        out = np.array([[PAD, 3, PAD, PAD], [PAD, 4, 5, 6]], dtype=np.int32)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(names[0], out)])

    pb_utils.bls_handler = graph
    search = served_search(version_dir, "gen", settings)
    done = []
    jobs = [Job([1], 2, 8), Job([5], 1, 2), Job([2, 2], 4, 4)]
    assert search(jobs, lambda i, ids: done.append(i)) == [[3, EOS], [EOS], [4, 5, 6]]
    assert done == [0, 1, 2]
    (feeds,) = feeds_seen  # one call; the max_length 2 row is not in it
    assert feeds["input_ids"].tolist() == [[1, PAD], [2, 2]]
    assert feeds["attention_mask"].tolist() == [[1, 0], [1, 1]]
    assert feeds["num_beams"].tolist() == [2, 4] and feeds["max_length"].tolist() == [8, 4]
    assert feeds["length_penalty"].tolist() == [1.0]
    assert all(feeds[k].dtype == np.int32 for k in ("input_ids", "num_beams", "max_length"))


def test_ct2_rows_come_back_as_python_ids_with_eos_below_the_limit(pb_utils) -> None:
    """ONE call for the batch: ids padded with -1 on the right, each row's beam and limit
    (HF's max_length minus the start token); the -1 padding of the answer dropped, EOS put back
    where a row ended before its limit, and plain ints (the texts are looked up by them)."""
    calls = []

    def called(model, feeds, names):
        calls.append({k: v.copy() for k, v in feeds.items()})
        out = np.array([[5, 6, -1, -1], [7, 8, 9, -1], [4, 4, 4, 4]], dtype=np.int32)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(names[0], out)])

    pb_utils.bls_handler = called
    jobs = [Job([3, EOS], 4, 64), Job([3, 4, 5, EOS], 1, 4), Job([3, EOS], 2, 5)]
    done = []
    results = generate_ct2("nmt_ct2", jobs, EOS, lambda i, ids: done.append((i, ids)))
    assert results == [[5, 6, EOS], [7, 8, 9], [4, 4, 4, 4]]
    assert all(type(t) is int for row in results for t in row)
    assert done == list(enumerate(results))
    (feeds,) = calls
    assert feeds["SOURCE_IDS"].tolist() == [[3, EOS, -1, -1], [3, 4, 5, EOS], [3, EOS, -1, -1]]
    assert feeds["BEAM_SIZE"].tolist() == [[4], [1], [2]]
    assert feeds["MAX_DECODING_LENGTH"].tolist() == [[63], [3], [4]]
    assert CT2_OUTPUT == "TARGET_IDS"
