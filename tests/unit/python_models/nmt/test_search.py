"""triton_kit.python_models.nmt.decode's greedy and beam search over a toy model, without a server.

The toy decoder's next-token probabilities are a table keyed by the whole prefix read
back from its own KV cache, so a search that reorders the cache wrongly asks for the
wrong prefix. Every expected sequence is worked out by hand in the comments (Hugging
Face's rules: beam candidates are the top 2k, only the first k may finish, scores are
normalised by length ** length_penalty, forced eos at max_length - 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from triton_kit.python_models.nmt.decode import (
    DecodeSettings,
    Job,
    generate,
    initial_state,
    pad_sources,
)

EOS, A, B, START = 0, 1, 2, 3  # START is also the pad id, as in Marian
SETTINGS = DecodeSettings(
    decoder_start_token_id=START, eos_token_id=EOS, pad_token_id=START, cache_shape=(1, 1, 1)
)
TINY = 1e-6

# Probabilities of the next token after each prefix (start token included).
TREE = {
    (START,): {A: 0.5, B: 0.45, EOS: 0.05},
    (START, A): {EOS: 0.4, A: 0.3, B: 0.3},
    (START, B): {EOS: 0.9, A: 0.05, B: 0.05},
    (START, A, A): {EOS: 1.0},
    (START, A, B): {EOS: 1.0},
}


class TreeModel:
    """Encoder: each source row's first id as its cross state. Decoder: TREE lookups."""

    def __init__(self, tree=TREE) -> None:
        self.tree = tree
        self.steps = 0

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return input_ids[:, 0].astype(np.float32).reshape(1, 1, -1, 1, 1, 1)

    def step(self, input_ids, attention_mask, cross_kv, past_kv):
        self.steps += 1
        rows = input_ids.shape[0]
        assert cross_kv.shape[2] == rows == attention_mask.shape[0] == past_kv.shape[2]
        logits = np.full((rows, 4), math.log(TINY), dtype=np.float32)
        for row in range(rows):
            prefix = (*past_kv[0, 0, row, 0, :, 0].astype(int).tolist(), int(input_ids[row, 0]))
            for token, p in self.tree.get(prefix, {EOS: 1.0}).items():
                logits[row, token] = math.log(p)
        new = np.repeat(input_ids.astype(np.float32).reshape(1, 1, rows, 1, 1, 1), 2, axis=1)
        return logits, np.concatenate([past_kv, new], axis=4)


def _decode(jobs, settings=SETTINGS, tree=TREE):
    done = []
    results = generate(TreeModel(tree), jobs, settings, lambda i, ids: done.append((i, ids)))
    return results, done


def test_greedy_follows_the_most_likely_token() -> None:
    # START -> A (0.5) -> EOS (0.4 > 0.3)
    assert _decode([Job([5, 6], beam_size=1, max_length=10)])[0] == [[A, EOS]]


def test_beam_two_finds_the_more_likely_sentence() -> None:
    # Step 1 keeps A (log .5) and B (log .45). Step 2: B EOS = log .405 = -0.904 and
    # A EOS = log .2 = -1.609 finish (normalised by 2: -0.452, -0.805); the running
    # A A / A B (log .15 / 2 = -0.948) cannot beat -0.805: stop. Best: B EOS.
    assert _decode([Job([5], beam_size=2, max_length=10)])[0] == [[B, EOS]]


def test_length_limit_and_forced_eos() -> None:
    # max_length 3 counts the start token: at cur_len 2 = max_length - 1, eos is forced.
    assert _decode([Job([5], beam_size=1, max_length=3)])[0] == [[A, EOS]]
    tree = {**TREE, (START, A): {B: 0.9, EOS: 0.1}}
    assert _decode([Job([5], beam_size=1, max_length=3)], tree=tree)[0] == [[A, EOS]]
    loose = DecodeSettings(START, EOS, START, (1, 1, 1), forced_eos=False)
    # Without forcing, the limit still ends the sentence, on whatever token came.
    assert _decode([Job([5], beam_size=1, max_length=3)], loose, tree)[0] == [[A, B]]
    assert _decode([Job([5], beam_size=1, max_length=2)], loose, tree)[0] == [[A]]


def test_suppressed_tokens_are_never_chosen() -> None:
    settings = DecodeSettings(START, EOS, START, (1, 1, 1), suppressed_token_ids=(A,))
    # A suppressed: START -> B (0.45) -> EOS.
    assert _decode([Job([5], beam_size=1, max_length=10)], settings)[0] == [[B, EOS]]
    assert _decode([Job([5], beam_size=2, max_length=10)], settings)[0] == [[B, EOS]]


def test_length_penalty_can_prefer_the_longer_sentence() -> None:
    # Beam 2 over a tree where the short sentence A EOS has log .2 = -1.609 at length 2
    # and the long B A EOS has log(.45 * .6 * 1) = -1.309 at length 3 (step 3).
    tree = {
        (START,): {A: 0.5, B: 0.45, EOS: 0.05},
        (START, A): {EOS: 0.4, A: 0.3, B: 0.3},
        (START, B): {A: 0.6, B: 0.35, EOS: 0.05},
        (START, B, A): {EOS: 1.0},
        (START, B, B): {EOS: 1.0},
        (START, A, A): {EOS: 1.0},
    }
    # Step 2 candidates: B A -1.309, A EOS -1.609 (finishes: -0.805), A A -1.897, ...
    # running B A, A A. Step 3: B A EOS -1.309 finishes (/3 = -0.436), beating A EOS.
    results, _ = _decode([Job([5], beam_size=2, max_length=10)], tree=tree)
    assert results == [[B, A, EOS]]
    # length_penalty 0: raw log-probabilities, -1.309 still beats -1.609.
    flat = DecodeSettings(START, EOS, START, (1, 1, 1), length_penalty=0.0)
    assert _decode([Job([5], beam_size=2, max_length=10)], flat, tree)[0] == [[B, A, EOS]]


def test_sentences_decode_together_and_leave_when_done() -> None:
    jobs = [
        Job([7, 8, 9], beam_size=2, max_length=10),
        Job([4], beam_size=1, max_length=2),
        Job([6, 6], beam_size=1, max_length=10),
    ]
    results, done = _decode(jobs)
    assert results == [[B, EOS], [EOS], [A, EOS]]
    # Job 1 ends at step 1 (max_length 2: eos forced at cur_len 1); jobs 0 and 2 at step 2,
    # reported in batch order.
    assert [index for index, _ in done] == [1, 0, 2]
    assert dict(done) == {0: [B, EOS], 1: [EOS], 2: [A, EOS]}


def test_no_jobs() -> None:
    model = TreeModel()
    assert generate(model, [], SETTINGS) == [] and model.steps == 0


def test_early_stopping_true_stops_at_k_finished() -> None:
    settings = DecodeSettings(START, EOS, START, (1, 1, 1), early_stopping=True)
    assert _decode([Job([5], beam_size=2, max_length=10)], settings)[0] == [[B, EOS]]


def test_pad_sources() -> None:
    ids, mask = pad_sources([Job([5, 6, 7], 1, 4), Job([8], 1, 4)], pad_id=9)
    assert ids.tolist() == [[5, 6, 7], [8, 9, 9]] and ids.dtype == np.int64
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]] and mask.dtype == np.int64


def test_initial_state_shapes() -> None:
    kv = initial_state(DecodeSettings(0, 0, 0, (6, 8, 64)), 3)
    assert kv.shape == (6, 2, 3, 8, 0, 64) and kv.dtype == np.float32
    rnn = initial_state(DecodeSettings(0, 0, 0, (2, 1, 16), recurrent_state=True), 5)
    assert rnn.shape == (2, 1, 5, 16) and not rnn.any()


@pytest.mark.parametrize("beam", [1, 2, 3])
def test_every_beam_ends_with_eos_within_the_limit(beam: int) -> None:
    (result,), _ = _decode([Job([5], beam_size=beam, max_length=4)])
    assert result[-1] == EOS and len(result) <= 3


LONGER = {  # the length-penalty tree: B A EOS beats A EOS once normalised
    (START,): {A: 0.5, B: 0.45, EOS: 0.05},
    (START, A): {EOS: 0.4, A: 0.3, B: 0.3},
    (START, B): {A: 0.6, B: 0.35, EOS: 0.05},
    (START, B, A): {EOS: 1.0},
}


def test_beam_at_the_length_limit() -> None:
    # max_length 2: at cur_len 1 eos is forced in every beam.
    assert _decode([Job([5], beam_size=2, max_length=2)])[0] == [[EOS]]
    # max_length 3, forced: cur_len 2 forces eos; A EOS log .5 beats B EOS log .45.
    assert _decode([Job([5], beam_size=2, max_length=3)], tree=LONGER)[0] == [[A, EOS]]
    # Not forced: every candidate at cur_len 2 hits the limit; B A (log .27) wins.
    loose = DecodeSettings(START, EOS, START, (1, 1, 1), forced_eos=False)
    assert _decode([Job([5], beam_size=2, max_length=3)], loose, LONGER)[0] == [[B, A]]


# Step 2: B EOS log .225 = -1.492 (/2 = -0.746) and A EOS log .2 (/2 = -0.805) finish; the
# running A A has log .175 = -1.743. Early stopping False stops (-1.743 / 2 = -0.871 cannot
# beat -0.805): B EOS. "never" judges by max_length - 1 = 9 (-1.743 / 9 = -0.194) and goes
# on: A A EOS finishes at -1.743 / 3 = -0.581 and wins. With length_penalty 0, "never"
# judges like False (raw scores: -1.743 < -1.609).
NEVER = {
    (START,): {A: 0.5, B: 0.45, EOS: 0.05},
    (START, A): {EOS: 0.4, A: 0.35, B: 0.25},
    (START, B): {EOS: 0.5, A: 0.25, B: 0.25},
    (START, A, A): {EOS: 1.0},
    (START, A, B): {EOS: 1.0},
}


@pytest.mark.parametrize(
    ("early_stopping", "length_penalty", "expected"),
    [(False, 1.0, [B, EOS]), ("never", 1.0, [A, A, EOS]), ("never", 0.0, [B, EOS])],
)
def test_early_stopping_never_keeps_searching(early_stopping, length_penalty, expected) -> None:
    settings = DecodeSettings(
        START, EOS, START, (1, 1, 1), length_penalty=length_penalty, early_stopping=early_stopping
    )
    assert _decode([Job([5], beam_size=2, max_length=10)], settings, NEVER)[0] == [expected]


def test_length_normalisation_divides_by_the_generated_length() -> None:
    # A EOS: log(.5 * .7358) = -1.0 at length 2 -> -0.5. B A EOS: log(.45 * .5213) = -1.45
    # at length 3 -> -0.483: the longer sentence wins. Dividing by length + 1 instead
    # (-0.333 vs -0.3625) would pick A EOS.
    tree = {
        (START,): {A: 0.5, B: 0.45, EOS: 0.05},
        (START, A): {EOS: 0.7358, A: 0.1321, B: 0.1321},
        (START, B): {A: 0.5213, EOS: 0.2, B: 0.2787},
        (START, B, A): {EOS: 1.0},
    }
    assert _decode([Job([5], beam_size=2, max_length=10)], tree=tree)[0] == [[B, A, EOS]]


class ReadOnlyLogits(TreeModel):
    """Logits the search may not write into: ONNX Runtime's IO-bound outputs are read-only
    views for some graphs (the INT8 decoder in triton_kit/benchmarks/precision/run.py)."""

    def step(self, input_ids, attention_mask, cross_kv, past_kv):
        logits, present = super().step(input_ids, attention_mask, cross_kv, past_kv)
        logits.flags.writeable = False
        return logits, present


@pytest.mark.parametrize("beam", [1, 2])
def test_read_only_logits_are_not_written(beam: int) -> None:
    settings = DecodeSettings(START, EOS, START, (1, 1, 1), suppressed_token_ids=(A,))
    got = generate(ReadOnlyLogits(), [Job([5], beam_size=beam, max_length=10)], settings)
    assert got == [[B, EOS]]  # as test_suppressed_tokens_are_never_chosen, from read-only rows


def test_row_candidates_are_each_rows_best_log_probs_after_suppression() -> None:
    from triton_kit.python_models.nmt.decode import row_candidates

    # Row 0: log_softmax over all four logits (HF takes it before the processors), then
    # token 3 suppressed: best are token 1 (2.0), token 2 (1.0). Row 1: equal logits, the
    # lower id first (HF's topk and argmax order).
    logits = np.array([[0.0, 2.0, 1.0, 2.0], [1.0, 1.0, 0.0, 1.0]], dtype=np.float32)
    values, tokens = row_candidates(logits.copy(), 2, (3,))
    lse = [math.log(1 + math.e**2 + math.e + math.e**2), math.log(3 * math.e + 1)]
    assert tokens.tolist() == [[1, 2], [0, 1]]
    np.testing.assert_allclose(values, [[2 - lse[0], 1 - lse[0]], [1 - lse[1], 1 - lse[1]]], 1e-6)
    # More than a block of 64 tokens: the best are found across blocks.
    wide = np.zeros((1, 300), dtype=np.float32)
    wide[0, [299, 5, 130]] = [3.0, 2.0, 2.0]
    assert row_candidates(wide, 3, ())[1].tolist() == [[299, 5, 130]]
    # Equal best logits in different blocks: the lower id wins, as HF's argmax and topk do.
    wide[0, [40, 41, 299]] = 9.0
    for keep in (1, 2):
        assert row_candidates(wide.copy(), keep, ())[1].tolist() == [[40, 41][:keep]]
    assert row_candidates(wide.copy(), 3, (41,))[1].tolist() == [[40, 299, 5]]


class OpaqueLogits:
    """Logits the search cannot read (a device tensor): only the model's ``candidates`` can."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array
        self.shape = array.shape

    def __getitem__(self, rows: slice) -> OpaqueLogits:
        return OpaqueLogits(self._array[rows])


class CandidatesModel(TreeModel):
    """A step model that keeps its logits and hands the search each row's best tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.keeps: list[int] = []

    def step(self, input_ids, attention_mask, cross_kv, past_kv):
        logits, present = super().step(input_ids, attention_mask, cross_kv, past_kv)
        return OpaqueLogits(logits), present

    def candidates(self, logits: OpaqueLogits, keep: int, suppressed: tuple[int, ...]):
        from triton_kit.python_models.nmt.decode import row_candidates

        self.keeps.append(keep)
        return row_candidates(logits._array.copy(), keep, suppressed)


@pytest.mark.parametrize(("beam", "keep"), [(1, 1), (2, 4)])
def test_a_model_that_offers_candidates_is_never_asked_for_its_logits(beam, keep) -> None:
    # The torch step model on a GPU: [rows, vocab] logits stay there, [rows, keep] come back.
    settings = DecodeSettings(START, EOS, START, (1, 1, 1), suppressed_token_ids=(A,))
    jobs = [Job([5], beam_size=beam, max_length=10), Job([6], beam_size=beam, max_length=3)]
    model = CandidatesModel()
    assert generate(model, jobs, settings) == generate(TreeModel(), jobs, settings)
    assert set(model.keeps) == {min(keep, 4)}  # 2 x beam per row (the vocabulary is 4 wide)


class HostCandidatesModel(TreeModel):
    """Host (numpy) logits and its own candidates, counting each call's ``keep``."""

    def __init__(self) -> None:
        super().__init__()
        self.keeps: list[int] = []

    def candidates(self, logits: np.ndarray, keep: int, suppressed: tuple[int, ...]):
        from triton_kit.python_models.nmt.decode import row_candidates

        self.keeps.append(keep)
        return row_candidates(logits.copy(), keep, suppressed)


def test_greedy_on_host_logits_takes_the_argmax_without_log_probs() -> None:
    # Greedy never reads log-probs: over 58k tokens a log_softmax was ~4 ms a step at 32
    # rows (numpy or ONNX Runtime) against 0.3 ms for an argmax. Beam groups still ask.
    settings = DecodeSettings(START, EOS, START, (1, 1, 1), suppressed_token_ids=(A,))
    jobs = [Job([5], beam_size=1, max_length=10), Job([6], beam_size=2, max_length=10)]
    model = HostCandidatesModel()
    assert generate(model, jobs, settings) == [[B, EOS], [B, EOS]]
    assert model.keeps and set(model.keeps) == {4}  # the beam-2 group's 2 x beam only
