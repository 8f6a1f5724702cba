"""The vectorised beam search's top-k against a brute-force one (no server, no model).

The parity tests run vocabularies of 60-140 tokens, where every block is a candidate;
these cover the two-level top-k of large vocabularies (opus-mt-en-de has 58,101).
"""

from __future__ import annotations

import numpy as np
import pytest

from triton_kit.python_models.nmt.decode import (
    DecodeSettings,
    Job,
    _Group,
    _row_candidates,
    row_candidates,
)

EOS, PAD = 0, 7


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("vocab", [3001, 4096, 140, 60])
def test_row_candidates_hold_each_rows_best(vocab: int) -> None:
    rng = np.random.default_rng(vocab)
    scores = rng.standard_normal((6, vocab)).astype(np.float32)
    scores[0, : vocab // 2] = -np.inf
    scores[1, -3:] = 9.0  # the best three in the last (partial) block
    keep = 8
    candidates = _row_candidates(scores, keep)
    for row, found in zip(scores, candidates, strict=True):
        best = np.argsort(-row, kind="stable")[:keep]
        assert set(best) <= set(found.tolist())
        assert np.all(np.diff(found) > 0)


def _brute_force(logits, scores, max_length, cur_len, keep, vocab):
    log_probs = _log_softmax(logits).reshape(scores.shape[0], scores.shape[1], vocab)
    log_probs[:, :, PAD] = -np.inf
    forced = max_length - 1 == cur_len
    log_probs[forced] = -np.inf
    log_probs[forced, :, EOS] = 0.0
    totals = (log_probs + scores[:, :, None]).reshape(scores.shape[0], -1)
    top = np.argsort(-totals, axis=1, kind="stable")[:, :keep]
    return np.take_along_axis(totals, top, 1), top, forced


@pytest.mark.parametrize("vocab", [3001, 140])
def test_group_candidates_match_a_full_log_softmax_topk(vocab: int) -> None:
    settings = DecodeSettings(PAD, EOS, PAD, (1, 1, 1), (PAD,), True)
    beam, n, cur_len = 4, 5, 6
    jobs = [Job([1], beam, length) for length in (32, 7, 32, 32, 7)]  # two forced this step
    group = _Group(beam, np.arange(n), jobs, settings)
    rng = np.random.default_rng(1)
    group.tokens = np.zeros((n, beam, cur_len), dtype=np.int64)
    group.scores = -rng.random((n, beam), dtype=np.float32) * 5
    logits = (rng.standard_normal((n * beam, vocab)) * 3).astype(np.float32)
    logits[3, 100] = logits[3, 101] = 50.0  # a tie: the lower token comes first
    group.scores[0] = [-9.0, -9.0, -9.0, 0.0]
    expected, expected_top, forced = _brute_force(
        logits.copy(), group.scores, group.max_length, cur_len, 2 * beam, vocab
    )
    values, tokens = row_candidates(logits, 2 * beam, settings.suppressed_token_ids)
    values, tokens = group._force_eos(values, tokens, cur_len)
    scores, beams, tokens = group._candidates(values, tokens, 2 * beam)
    top = beams * vocab + tokens
    free = ~forced
    np.testing.assert_array_equal(top[free], expected_top[free])
    np.testing.assert_array_equal(scores[free], expected[free])
    finite = np.isfinite(expected[forced])  # eos from each beam; the rest -inf in any order
    np.testing.assert_array_equal(scores[forced][finite], expected[forced][finite])
    np.testing.assert_array_equal(top[forced][finite], expected_top[forced][finite])
    assert top[0, :2].tolist() == [3 * vocab + 100, 3 * vocab + 101]


@pytest.mark.parametrize("threads", [1, 2])
def test_onnx_runtime_candidates_match_the_numpy_search(threads: int) -> None:
    """The CPU step model's candidates (log_softmax and TopK inside ONNX Runtime) pick the
    same tokens as the numpy path, ties to the lower id, log-probs within float32 rounding."""
    from triton_kit.python_models.nmt.candidates import OrtCandidates

    rng = np.random.default_rng(threads)
    logits = (rng.standard_normal((9, 3001)) * 3).astype(np.float32)
    logits[2, [40, 41, 2999]] = 30.0  # a three-way tie: ids in order
    logits[4, PAD] = 99.0  # the best logit, banned
    candidates = OrtCandidates(threads)
    for keep in (1, 8):
        values, tokens = candidates(logits, keep, (PAD,))
        expected_values, expected_tokens = row_candidates(logits.copy(), keep, (PAD,))
        assert tokens.dtype == np.int64 and tokens.tolist() == expected_tokens.tolist()
        np.testing.assert_allclose(values, expected_values, rtol=0, atol=2e-5)
    assert candidates(logits, 3, (PAD,))[1][2].tolist() == [40, 41, 2999]
    assert PAD not in candidates(logits, 8, (PAD,))[1][4]
    logits[5, [7, PAD, 9]] = 50.0  # banned ids at a row's top, not in every row's
    for keep in (1, 8):
        values, tokens = candidates(logits, keep, (PAD, 7))
        expected_values, expected_tokens = row_candidates(logits.copy(), keep, (PAD, 7))
        assert tokens.tolist() == expected_tokens.tolist() and tokens[5, 0] == 9
        np.testing.assert_allclose(values, expected_values, rtol=0, atol=2e-5)
    unbanned = candidates(logits, 1, ())
    assert unbanned[1][4, 0] == PAD
    np.testing.assert_allclose(unbanned[0][4, 0], 0.0, atol=1e-6)  # log(~1): it dominates


def test_the_candidates_graph_loads_on_the_oldest_supported_onnxruntime():
    """The graph is built at run time in the stub, whose ONNX Runtime may be older than the
    `onnx` package that writes it: onnx 1.23 stamps IR version 14 by default, which ONNX
    Runtime 1.30 (the lent GPU machine) refused. pyproject's python-search extra (what a
    container serving an opt-in Python search installs) allows onnxruntime 1.20, which reads IR
    versions up to 10 (ONNX Runtime's versioning table)."""
    import onnx

    from triton_kit.python_models.nmt.candidates import candidates_graph

    model = onnx.load_from_string(candidates_graph())
    assert model.ir_version <= 10
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
