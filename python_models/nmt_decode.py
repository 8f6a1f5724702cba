"""Greedy and beam search over an encoder / decoder-step pair, in numpy.

One module serves both the in-process baseline (ONNX Runtime sessions) and the
Triton BLS model (``pb_utils.InferenceRequest``): the model calls go through a
:class:`StepModel`, everything else is here. The search reproduces Hugging Face
``generate`` token for token (``num_beams=1`` greedy, otherwise beam search with
``length_penalty`` and ``early_stopping``), including Marian's logits processors
(``bad_words_ids`` of single tokens, ``forced_eos_token_id`` at the length limit).

Sentences of one call are decoded together: each step runs the decoder once over
the rows of every live sentence (1 row for greedy, ``k`` for beam ``k``); each
sentence keeps its own beam size and length limit and leaves the batch, through
``on_done``, as soon as it is finished.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    ) -> tuple[np.ndarray, np.ndarray]:
        """``logits [rows, vocab]`` and the next state (rows on axis 2): the grown KV cache,
        or the RNN's new recurrent state."""


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


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@dataclass
class _Sentence:
    """Search state of one sentence; ``rows`` are its live rows in the current batch."""

    index: int
    job: Job
    settings: DecodeSettings
    sequences: list[list[int]]
    scores: np.ndarray
    finished: list[tuple[float, list[int]]] = field(default_factory=list)
    improvable: bool = True
    done: bool = False

    @property
    def width(self) -> int:
        return len(self.sequences)

    def process(self, logits: np.ndarray, cur_len: int) -> np.ndarray:
        """HF's logits processors, applied in place to this sentence's scores."""
        if self.settings.suppressed_token_ids:
            logits[:, list(self.settings.suppressed_token_ids)] = -np.inf
        if self.settings.forced_eos and cur_len == self.job.max_length - 1:
            logits[:, :] = -np.inf
            logits[:, self.settings.eos_token_id] = 0.0
        return logits

    def advance(self, logits: np.ndarray, cur_len: int) -> np.ndarray:
        """Consume this step's logits; return the origin row (local) of each next row."""
        if self.job.beam_size == 1:
            return self._greedy(logits, cur_len)
        return self._beam(logits, cur_len)

    def _greedy(self, logits: np.ndarray, cur_len: int) -> np.ndarray:
        token = int(np.argmax(self.process(logits.copy(), cur_len)[0]))
        self.sequences[0].append(token)
        if token == self.settings.eos_token_id or cur_len + 1 >= self.job.max_length:
            self.finished = [(0.0, self.sequences[0])]
            self.done = True
        return np.zeros(1, dtype=np.int64)

    def _beam(self, logits: np.ndarray, cur_len: int) -> np.ndarray:
        k, settings = self.job.beam_size, self.settings
        log_probs = self.process(log_softmax(logits.astype(np.float32)), cur_len)
        totals = (log_probs + self.scores[:, None]).reshape(-1)
        vocab = log_probs.shape[1]
        keep = min(2 * k, totals.size)
        top = np.argpartition(-totals, keep - 1)[:keep]
        top = top[np.argsort(-totals[top], kind="stable")]
        top_scores = totals[top].astype(np.float32)
        origins, tokens = top // vocab, top % vocab
        hits = (tokens == settings.eos_token_id) | (cur_len + 1 >= self.job.max_length)
        self._collect_finished(top_scores, origins, tokens, hits, cur_len)
        running = np.argsort(-(top_scores + hits * np.float32(_PENALTY)), kind="stable")[:k]
        self.sequences = [self.sequences[origins[j]] + [int(tokens[j])] for j in running]
        self.scores = top_scores[running] + hits[running] * np.float32(_PENALTY)
        self._check_early_stop(cur_len + 1)
        if bool(hits.all()) or (settings.early_stopping is True and len(self.finished) == k):
            self.done = True
        return origins[running]

    def _collect_finished(self, scores, origins, tokens, hits, cur_len: int) -> None:
        k = self.job.beam_size
        full = len(self.finished) == k and self.settings.early_stopping is True
        if full or not self.improvable:
            return
        normalised = scores / np.float32(cur_len**self.settings.length_penalty)
        candidates = list(self.finished)
        for j in range(min(k, len(scores))):
            if hits[j]:
                sequence = self.sequences[origins[j]] + [int(tokens[j])]
                candidates.append((float(normalised[j]), sequence))
        candidates.sort(key=lambda item: -item[0])  # stable: earlier hypotheses win ties
        self.finished = candidates[:k]

    def _check_early_stop(self, cur_len: int) -> None:
        """HF's heuristic: stop once no running beam can beat the worst finished one."""
        if not self.improvable or len(self.finished) < self.job.beam_size:
            return
        settings = self.settings
        if settings.early_stopping == "never" and settings.length_penalty > 0.0:
            length = self.job.max_length - 1
        else:
            length = cur_len - 1
        best_running = self.scores[0] / np.float32(length**settings.length_penalty)
        worst_finished = np.float32(min(score for score, _ in self.finished))
        self.improvable = bool(best_running > worst_finished)
        if not self.improvable:
            self.done = True

    def best(self) -> list[int]:
        return self.finished[0][1] if self.finished else self.sequences[0]


def initial_state(settings: DecodeSettings, rows: int) -> np.ndarray:
    """The decoder state before the first step. Beyond this, the search treats the state
    (and the encoder's cross state) as opaque tensors whose axis 2 is the row: it only
    reorders them by beam, so a KV cache and a recurrent state are driven alike."""
    layers, heads, head_dim = settings.cache_shape
    if settings.recurrent_state:
        return np.zeros((layers, heads, rows, head_dim), dtype=np.float32)
    return np.zeros((layers, 2, rows, heads, 0, head_dim), dtype=np.float32)


def pad_sources(jobs: Sequence[Job], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(job.source_ids) for job in jobs)
    ids = np.full((len(jobs), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(jobs), width), dtype=np.int64)
    for row, job in enumerate(jobs):
        ids[row, : len(job.source_ids)] = job.source_ids
        mask[row, : len(job.source_ids)] = 1
    return ids, mask


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
    ids, mask = pad_sources(jobs, settings.pad_token_id)
    cross = model.encode(ids, mask)
    start = settings.decoder_start_token_id
    live = [
        _Sentence(i, job, settings, [[start]], np.zeros(1, dtype=np.float32))
        for i, job in enumerate(jobs)
    ]
    row_sentence = np.arange(len(jobs))
    past = initial_state(settings, len(jobs))
    rows_cross, rows_mask = cross, mask
    cur_len = 1
    while live:
        last = np.array([[s.sequences[b][-1]] for s in live for b in range(s.width)], np.int64)
        logits, present = model.step(last, rows_mask, rows_cross, past)
        gather, still, offset = [], [], 0
        for sentence in live:
            width = sentence.width
            origins = sentence.advance(logits[offset : offset + width], cur_len)
            if sentence.done:
                results[sentence.index] = sentence.best()[1:]
                if on_done is not None:
                    on_done(sentence.index, results[sentence.index])
            else:
                gather.append(origins + offset)
                still.append(sentence)
            offset += width
        if not still:
            break
        index = np.concatenate(gather)
        new_rows = np.array([s.index for s in still for _ in range(s.width)])
        past = np.take(present, index, axis=2)
        if len(new_rows) != len(row_sentence) or not np.array_equal(new_rows, row_sentence):
            rows_cross = np.take(cross, new_rows, axis=2)
            rows_mask = mask[new_rows]
            row_sentence = new_rows
        live = still
        cur_len += 1
    return results
