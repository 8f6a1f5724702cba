"""Greedy and beam search over an encoder / decoder-step pair, in numpy.

One module serves the in-process baseline and the Triton ``nmt`` model alike: the
model calls go through a :class:`StepModel` (ONNX Runtime sessions, torch modules,
or BLS calls), everything else is here. The search reproduces Hugging Face
``generate`` token for token (``num_beams=1`` greedy, otherwise beam search with
``length_penalty`` and ``early_stopping``), including Marian's logits processors
(``bad_words_ids`` of single tokens, ``forced_eos_token_id`` at the length limit).

Sentences of one call are decoded together: each step runs the decoder once over
the rows of every live sentence (1 row for greedy, ``k`` for beam ``k``); each
sentence keeps its own beam size and length limit and leaves the batch, through
``on_done``, as soon as it is finished. The search is vectorised per beam size
(:class:`_Group`): one top-k over every sentence's beams at once, numpy arrays for
the hypotheses, and Python loops only over events (a hypothesis ending). The state
(KV cache) is reordered by beam inside the next step where the model ``reorders``
(the Transformer decoder's ``beam_index`` input: the graph slices the cache per layer
anyway, so the gather replaces a copy instead of adding one); else by one gather between
steps, skipped
when no row moved (greedy), done by the StepModel itself where it keeps the state
(``take``, a torch device).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

_PENALTY = -1.0e9  # HF's "never pick this" offset


class StepModel(Protocol):
    """The two model calls the search needs (ONNX Runtime in-process, or BLS in Triton)."""

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Cross state, opaque to the search, rows on axis 2: the Transformer's cross-attention
        K/V ``[layers, 2, batch, heads, src_len, head_dim]``; the RNN's ``[1, 2, batch,
        src_len, hidden]`` attention keys and values."""

    def step(
        self,
        input_ids: np.ndarray,
        attention_mask: np.ndarray,
        cross_kv: np.ndarray,
        past_kv: np.ndarray,
        beam_index: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``logits [rows, vocab]`` and the next state (rows on axis 2): the grown KV cache,
        or the RNN's new recurrent state. A model whose ``reorders`` is true (see
        :func:`reorders`) gets ``beam_index [rows]``, the ``past_kv`` row each row
        continues, every step; others get ``past_kv`` already in row order. A model that
        also has ``candidates`` (see :func:`candidates_of`) may keep the logits where they
        are (a device tensor)."""


def reorders(model: StepModel) -> bool:
    """Whether the model's step gathers the state by ``beam_index`` itself (in its graph);
    else the search reorders the state between steps (:func:`take_rows`)."""
    return bool(getattr(model, "reorders", False))


def candidates_of(model: StepModel) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """``(logits, keep, suppressed) -> (values, tokens)``: the model's own ``candidates``
    where it has one (top-k where its logits are, a GPU: [rows, keep] cross to the host
    instead of [rows, vocab]), else :func:`row_candidates` in numpy."""
    return getattr(model, "candidates", None) or row_candidates


def take_rows(model: StepModel, state, index: np.ndarray):
    """Rows ``index`` of a state along axis 2: the model's own ``take`` where it keeps states
    in its memory (a torch device), else numpy."""
    take = getattr(model, "take", None)
    return take(state, index) if take is not None else np.take(state, index, axis=2)


@dataclass(frozen=True)
class DecodeSettings:
    """Token ids and scoring rules, as in the checkpoint's generation config."""

    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int
    cache_shape: tuple[int, int, int]  # layers, heads, head_dim (recurrent: layers, 1, hidden)
    suppressed_token_ids: tuple[int, ...] = ()
    forced_eos: bool = True
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    recurrent_state: bool = False  # fixed-size RNN state instead of a growing KV cache


@dataclass(frozen=True)
class Job:
    """One sentence to translate. ``max_length`` counts the decoder start token, as in HF."""

    source_ids: Sequence[int]
    beam_size: int
    max_length: int


OnDone = Callable[[int, list[int]], None]


_BLOCK = 64  # tokens per block in the two-level top-k


def _row_candidates(scores: np.ndarray, keep: int) -> np.ndarray:
    """Token ids, ascending, that include each row's ``keep`` best: the tokens of the ``keep``
    blocks of ``_BLOCK`` with the highest maxima (a row's best ``keep`` lie in at most ``keep``
    blocks, each with a maximum at least the ``keep``-th value). Block maxima cost one pass;
    ``np.argpartition`` over a 58k vocabulary was 1 µs per 1,000 scores, 5x a max pass.
    Ids past the vocabulary (the last block's padding) are for the caller to mask."""
    vocab = scores.shape[1]
    starts = np.arange(0, vocab, _BLOCK)
    if len(starts) <= keep:
        blocks = np.broadcast_to(np.arange(len(starts)), (scores.shape[0], len(starts)))
    else:
        blocks = _best_blocks(np.maximum.reduceat(scores, starts, axis=1), keep)
    return (blocks[:, :, None] * _BLOCK + np.arange(_BLOCK)).reshape(scores.shape[0], -1)


def best_first(values: np.ndarray, tokens: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``keep`` best, highest value first and the lower token id on ties (the
    order of HF's top-k and argmax), whatever order the candidates came in."""
    order = np.lexsort((tokens, -values))[:, :keep]
    return np.take_along_axis(values, order, 1), np.take_along_axis(tokens, order, 1)


def _banned(logits: np.ndarray, suppressed: Sequence[int]) -> np.ndarray:
    """``logits`` with the ``suppressed`` ids at -inf: in place where they may be written (this
    step's, read once), else a copy (a read-only view of the engine's output buffer)."""
    if suppressed:
        if not logits.flags.writeable:
            logits = logits.copy()
        logits[:, list(suppressed)] = -np.inf
    return logits


def best_tokens(logits, suppressed: Sequence[int], candidates: Callable[..., tuple]) -> np.ndarray:
    """Greedy's pick, ``[rows, 1]``: each row's best token once ``suppressed`` are banned, the
    lower id on ties (argmax). Greedy never reads log-probs, so host logits skip log_softmax
    (over 58k tokens, ~4 ms a step at 32 rows against 0.3 ms for the argmax); logits the
    search cannot read (a device tensor) go to the model's ``candidates``."""
    if not isinstance(logits, np.ndarray):
        return candidates(logits, 1, suppressed)[1]
    return _banned(logits, suppressed).argmax(axis=1)[:, None]


def row_candidates(
    logits: np.ndarray, keep: int, suppressed: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``keep`` best tokens once ``suppressed`` are banned, best first, with their
    log-probabilities: HF's log_softmax over every token (before the processors), then the
    ban. Within a row log_softmax only shifts the logits, so the best tokens are the best
    logits: a few candidates per row (:func:`_row_candidates`), then the exact order.
    Writes into ``logits`` where it may (they are this step's, read once)."""
    vocab = logits.shape[1]
    logits = logits.astype(np.float32, copy=False)
    peak = logits.max(axis=1, keepdims=True)
    exp = np.subtract(logits, peak)  # the same float32 operations as log_softmax
    np.exp(exp, out=exp)
    log_total = np.log(exp.sum(axis=-1, keepdims=True))
    logits = _banned(logits, suppressed)
    tokens = _row_candidates(logits, keep)
    padding = tokens >= vocab  # past the last block's end: kept in range, never chosen
    tokens = np.minimum(tokens, vocab - 1)
    values = (np.take_along_axis(logits, tokens, 1) - peak) - log_total
    values[padding] = -np.inf
    return best_first(values, tokens, keep)


def _best_blocks(maxima: np.ndarray, keep: int) -> np.ndarray:
    """Each row's ``keep`` blocks by maximum, ties to the lower block, ascending. The lower
    block on ties keeps the lower token id among equal logits (HF's argmax and top-k): a
    tie split across the cut by ``argpartition`` alone once lost token 40 to token 2999."""
    cut = maxima.shape[1] - keep
    kth = np.partition(maxima, cut, axis=1)[:, cut, None]
    above, tied = maxima > kth, maxima == kth
    room = keep - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= room))
    return np.nonzero(chosen)[1].reshape(len(maxima), keep)


class _Group:
    """Every live sentence of one beam size, searched together: arrays over [sentence, beam].

    All sentences of one call start together, so a group's width is uniform (1 at the first
    step, ``beam`` after). Per step the work is a few numpy calls over the whole group; Python
    loops run only over events (a hypothesis ending, a sentence leaving).
    """

    def __init__(self, beam: int, index: np.ndarray, jobs: Sequence[Job], settings) -> None:
        self.beam, self.settings = beam, settings
        self.index = index  # job index of each sentence
        self.max_length = np.array([jobs[i].max_length for i in index], dtype=np.int64)
        start = settings.decoder_start_token_id
        self.tokens = np.full((len(index), 1, 1), start, dtype=np.int64)  # [n, width, cur_len]
        self.scores = np.zeros((len(index), 1), dtype=np.float32)
        self.finished: list[list[tuple[float, list[int]]]] = [[] for _ in index]
        self.improvable = np.ones(len(index), dtype=bool)
        self.worst = np.full(len(index), np.inf, dtype=np.float32)  # worst finished score

    @property
    def rows(self) -> int:
        return self.tokens.shape[0] * self.tokens.shape[1]

    def last_tokens(self) -> np.ndarray:
        return self.tokens[:, :, -1].reshape(-1)

    def row_sentences(self) -> np.ndarray:
        return np.repeat(self.index, self.tokens.shape[1])

    @property
    def keep(self) -> int:
        """Candidates per row this group needs: the best token (greedy), HF's 2 x beam."""
        return 1 if self.beam == 1 else 2 * self.beam

    def advance(self, values, tokens, cur_len: int, done: Callable[[int, list[int]], None]):
        """Consume this step's row candidates (this group's rows, best first, see
        :func:`row_candidates`; greedy: ``values`` None, :func:`best_tokens`); return the
        rows (local) to keep."""
        width = self.tokens.shape[1]  # before this step
        values, tokens = self._force_eos(values, tokens, cur_len)
        step = self._greedy if self.beam == 1 else self._beam
        finished = step(values, tokens, cur_len)
        for s in np.flatnonzero(finished):
            best = self.finished[s][0][1] if self.finished[s] else self.tokens[s, 0].tolist()
            done(int(self.index[s]), best[1:])
        return self._keep(~finished, width)

    def _force_eos(self, values: np.ndarray | None, tokens: np.ndarray, cur_len: int):
        """HF's forced eos at ``max_length - 1``: a forced row's log-probs are 0 for eos and
        -inf for every other token (which then cannot win, whatever its id)."""
        if not self.settings.forced_eos:
            return values, tokens
        forced = np.repeat(self.max_length - 1 == cur_len, self.tokens.shape[1])
        if forced.any():
            tokens = tokens.copy()
            tokens[forced, 0] = self.settings.eos_token_id
            if values is not None:
                values = values.copy()
                values[forced] = -np.inf
                values[forced, 0] = 0.0
        return values, tokens

    def _greedy(self, values: None, tokens: np.ndarray, cur_len: int) -> np.ndarray:
        n = len(self.index)
        token = tokens[:, 0]
        self.tokens = np.concatenate([self.tokens, token.reshape(n, 1, 1)], axis=2)
        self.origins = np.zeros((n, 1), dtype=np.int64)
        return (token == self.settings.eos_token_id) | (cur_len + 1 >= self.max_length)

    def _candidates(self, values: np.ndarray, tokens: np.ndarray, keep: int):
        """The ``keep`` best (beam, token) continuations per sentence: HF's top-k over beam
        scores plus log-probs. A sentence's best ``keep`` take at most ``keep`` from one row,
        so each row's best ``keep`` suffice. Ties go to the lower (beam, token).
        Returns their scores, beams and tokens, best first."""
        n, width = self.tokens.shape[:2]
        per_row = tokens.shape[1]
        totals = (values + self.scores.reshape(-1, 1)).reshape(n, width * per_row)
        beams = np.broadcast_to(np.repeat(np.arange(width), per_row), totals.shape)
        order = np.argsort(-totals, axis=1, kind="stable")[:, :keep]
        tokens = np.take_along_axis(tokens.reshape(n, width * per_row), order, 1)
        return np.take_along_axis(totals, order, 1), np.take_along_axis(beams, order, 1), tokens

    def _beam(self, values: np.ndarray, tokens: np.ndarray, cur_len: int) -> np.ndarray:
        k, settings = self.beam, self.settings
        n, width = self.tokens.shape[:2]
        keep = min(2 * k, width * tokens.shape[1])
        top_scores, origins, tokens = self._candidates(values, tokens, keep)
        hits = (tokens == settings.eos_token_id) | (cur_len + 1 >= self.max_length[:, None])
        self._collect_finished(top_scores, origins, tokens, hits, cur_len)
        penalised = top_scores + hits * np.float32(_PENALTY)
        running = np.argsort(-penalised, axis=1, kind="stable")[:, :k]
        origins = np.take_along_axis(origins, running, 1)
        history = np.take_along_axis(self.tokens, origins[:, :, None], 1)
        chosen = np.take_along_axis(tokens, running, 1)
        self.tokens = np.concatenate([history, chosen[:, :, None]], axis=2)
        self.scores = np.take_along_axis(penalised, running, 1)
        self.origins = origins  # beam each kept row continues
        self._check_early_stop(cur_len + 1)
        counts = np.array([len(f) for f in self.finished])
        full = (counts == k) if settings.early_stopping is True else np.zeros(n, dtype=bool)
        return hits.all(axis=1) | full | ~self.improvable

    def _collect_finished(self, scores, origins, tokens, hits, cur_len: int) -> None:
        """HF's beam hypotheses: the best ``beam`` finished ones per sentence, stable on ties."""
        k = self.beam
        eligible = self.improvable.copy()
        if self.settings.early_stopping is True:
            eligible &= np.array([len(f) < k for f in self.finished])
        top = min(k, scores.shape[1])
        events = np.flatnonzero(eligible & hits[:, :top].any(axis=1))
        if not len(events):
            return
        normalised = scores / np.float32(cur_len**self.settings.length_penalty)
        for s in events:
            candidates = list(self.finished[s])
            for j in np.flatnonzero(hits[s, :top]):
                sequence = [*self.tokens[s, origins[s, j]].tolist(), int(tokens[s, j])]
                candidates.append((float(normalised[s, j]), sequence))
            candidates.sort(key=lambda item: -item[0])  # stable: earlier hypotheses win ties
            self.finished[s] = candidates[:k]
            self.worst[s] = np.float32(min(score for score, _ in self.finished[s]))

    def _check_early_stop(self, cur_len: int) -> None:
        """HF's heuristic: stop once no running beam can beat the worst finished one."""
        settings = self.settings
        counts = np.array([len(f) for f in self.finished])
        check = self.improvable & (counts >= self.beam)
        if not check.any():
            return
        if settings.early_stopping == "never" and settings.length_penalty > 0.0:
            length = (self.max_length - 1).astype(np.float64)
        else:
            length = np.full(len(self.index), float(cur_len - 1))
        denominator = (length**settings.length_penalty).astype(np.float32)
        best_running = self.scores[:, 0] / denominator
        self.improvable = np.where(check, best_running > self.worst, self.improvable)

    def _keep(self, alive: np.ndarray, width: int) -> np.ndarray:
        """Drop finished sentences; the local rows (of this step's input) that go on."""
        rows = (np.arange(len(alive))[:, None] * width + self.origins)[alive].reshape(-1)
        if not alive.all():
            self.index = self.index[alive]
            self.max_length = self.max_length[alive]
            self.tokens, self.scores = self.tokens[alive], self.scores[alive]
            self.finished = [f for f, a in zip(self.finished, alive, strict=True) if a]
            self.improvable, self.worst = self.improvable[alive], self.worst[alive]
        return rows


STATE_ROWS = -1  # the row axis (axis 2) in a state template


def state_template(settings: DecodeSettings) -> tuple[int, ...]:
    """The shape of the decoder state before the first step, :data:`STATE_ROWS` on the row
    axis: the RNN's recurrent state ``[layers, 1, rows, hidden]``, or the Transformer's empty
    KV cache ``[layers, 2, rows, heads, 0, head_dim]``. The TorchScript search builds its
    first state from the same template."""
    layers, heads, head_dim = settings.cache_shape
    if settings.recurrent_state:
        return (layers, heads, STATE_ROWS, head_dim)
    return (layers, 2, STATE_ROWS, heads, 0, head_dim)


def initial_state(settings: DecodeSettings, rows: int) -> np.ndarray:
    """The decoder state before the first step (zeros). Beyond this, the search treats the
    state (and the encoder's cross state) as opaque tensors whose axis 2 is the row: it only
    reorders them by beam, so a KV cache and a recurrent state are driven alike."""
    shape = [rows if d == STATE_ROWS else d for d in state_template(settings)]
    return np.zeros(shape, dtype=np.float32)


def pad_sources(jobs: Sequence[Job], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(job.source_ids) for job in jobs)
    ids = np.full((len(jobs), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(jobs), width), dtype=np.int64)
    for row, job in enumerate(jobs):
        ids[row, : len(job.source_ids)] = job.source_ids
        mask[row, : len(job.source_ids)] = 1
    return ids, mask


def _groups(jobs: Sequence[Job], settings: DecodeSettings) -> list[_Group]:
    beams = np.array([job.beam_size for job in jobs])
    return [
        _Group(int(beam), np.flatnonzero(beams == beam), jobs, settings)
        for beam in dict.fromkeys(beams.tolist())
    ]


def generate(
    model: StepModel,
    jobs: Sequence[Job],
    settings: DecodeSettings,
    on_done: OnDone | None = None,
) -> list[list[int]]:
    """Decode every job; returns generated ids (start token excluded, eos kept)."""
    results: list[list[int]] = [[] for _ in jobs]
    if not jobs:
        return results

    def done(index: int, ids: list[int]) -> None:
        results[index] = ids
        if on_done is not None:
            on_done(index, ids)

    candidates, suppressed = candidates_of(model), tuple(settings.suppressed_token_ids)
    ids, mask = pad_sources(jobs, settings.pad_token_id)
    cross = model.encode(ids, mask)
    groups = _groups(jobs, settings)
    row_sentence = np.arange(len(jobs))
    past = initial_state(settings, len(jobs))
    rows_cross, rows_mask = cross, mask
    index = np.arange(len(jobs))  # the past row each row continues
    cur_len = 1
    while groups:
        new_rows = np.concatenate([g.row_sentences() for g in groups])
        if not np.array_equal(new_rows, row_sentence):
            rows_cross = take_rows(model, cross, new_rows)
            rows_mask = mask[new_rows]
            row_sentence = new_rows
        last = np.concatenate([g.last_tokens() for g in groups])[:, None]
        logits, past = _step(model, (last, rows_mask, rows_cross), past, index)
        keep, offset = [], 0
        for group in groups:
            rows = group.rows
            part = logits[offset : offset + rows]
            if group.beam == 1:
                values, tokens = None, best_tokens(part, suppressed, candidates)
            else:
                values, tokens = candidates(part, min(group.keep, logits.shape[1]), suppressed)
            keep.append(group.advance(values, tokens, cur_len, done) + offset)
            offset += rows
        groups = [g for g in groups if len(g.index)]
        index = np.concatenate(keep)  # reorder by beam, drop finished rows: the next step's
        cur_len += 1
    return results


def _step(model: StepModel, inputs: tuple, past, index: np.ndarray):
    """One decoder step from ``past`` whose rows ``index`` go on: the model gathers them
    itself where it ``reorders``, else they are gathered here when any row moved."""
    if reorders(model):
        return model.step(*inputs, past, index)
    if len(index) != past.shape[2] or not np.array_equal(index, np.arange(len(index))):
        past = take_rows(model, past, index)
    return model.step(*inputs, past)
