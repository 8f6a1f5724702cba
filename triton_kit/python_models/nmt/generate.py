"""Calls to the generation model ``nmt_generate``, and its output read back as Hugging Face
``generate`` ids. Two kinds: ONNX Runtime's BeamSearch operator over Marian's encoder and
decoder (run in-process, one sentence a call, below), and the TorchScript search served by
Triton's pytorch backend (``--engine torch``: :func:`generate_batched`, BLS, one call per beam
size of a batch: it batches sentences exactly, and runs where the build put it, a GPU).

One sentence a call. The operator's CPU scorer decides a sentence is done from the
candidate scores at ``batch * num_beams`` instead of ``batch * 2 * num_beams`` (onnxruntime
``beam_search_scorer.cc``, ``next_scores.subspan(batch * num_beams_, top_k)``, 1.32 and
its main branch), so in a batch of several sentences each one stops on its neighbours'
scores: sentences end early or late against HF (2 of 64 held-out sentences differed at
beam 4), and the batch runs to ``max_length`` (32 sentences, beam 4: 420 against 122 ms at
``max_length`` 64 and 24). With one sentence the scores it reads are its own.

One difference with HF remains at beam > 1: the operator stops a sentence when the best
of all ``2 * beam`` candidates (EOS ones included) cannot beat its worst finished
hypothesis, HF when its best running beam cannot. It may search on after HF stops, and then
returns a hypothesis that HF's own score ranks higher (tests/unit/build_engines/
test_nmt_generation_graph.py: every held-out test sentence of the number model identical;
0 to 5 of 24 on a random Marian built to end at varied lengths).

The graph's ``sequences`` hold the start token, the tokens, then pad; a hypothesis that
ended on EOS is stored without it. HF's ids keep the EOS, so it is put back on every
sequence shorter than the limit (one at the limit was cut there: no EOS, Marian's forced
EOS aside, which the graph applies itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

GRAPH_OUTPUT = "sequences"
TORCH_GENERATE_OUTPUT = "sequences"  # the TorchScript search's [rows, length] int64 ids
MIN_GRAPH_MAX_LENGTH = 3  # at 2 the operator skips its first step and reads garbage (1.32)


class Session(Protocol):
    """ONNX Runtime's ``run(None, feeds)``: an in-process session, or a BLS stand-in."""

    def run(self, output_names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...


def feeds(
    source_ids: Sequence[int], beam_size: int, max_length: int, length_penalty: float
) -> dict[str, np.ndarray]:
    """The graph's inputs for one sentence (int32 ids, a [1] tensor per setting)."""
    ids = np.asarray([source_ids], dtype=np.int32)
    return {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "max_length": np.array([max_length], dtype=np.int32),
        "min_length": np.array([0], dtype=np.int32),
        "num_beams": np.array([beam_size], dtype=np.int32),
        "num_return_sequences": np.array([1], dtype=np.int32),
        "length_penalty": np.array([length_penalty], dtype=np.float32),
    }


def hf_ids(
    sequence: np.ndarray, max_length: int, eos_token_id: int, pad_token_id: int
) -> list[int]:
    """One row of ``sequences`` as HF ``generate`` returns it (start token and padding off)."""
    ids = [int(t) for t in sequence[1:]]
    while ids and ids[-1] == pad_token_id:
        ids.pop()
    if len(ids) < max_length - 1:
        ids.append(eos_token_id)
    return ids


def translate_one(
    session: Session,
    source_ids: Sequence[int],
    beam_size: int,
    max_length: int,
    tokens: tuple[int, int, bool],
    length_penalty: float,
) -> list[int]:
    """One sentence through the graph. ``tokens``: (eos, pad, forced_eos)."""
    eos, pad, forced_eos = tokens
    if max_length < MIN_GRAPH_MAX_LENGTH:
        if forced_eos:  # HF forces EOS at cur_len 1 == max_length - 1: nothing else is possible
            return [eos]
        raise ValueError(f"max_length must be at least {MIN_GRAPH_MAX_LENGTH} for this model")
    feed = feeds(source_ids, beam_size, max_length, length_penalty)
    sequences = session.run([GRAPH_OUTPUT], feed)[0]
    return hf_ids(sequences[0, 0], max_length, eos, pad)


def generate_each(
    session: Session,
    jobs: Sequence[Any],
    tokens: tuple[int, int, bool],
    length_penalty: float,
    on_done: Callable[[int, list[int]], None] | None = None,
) -> list[list[int]]:
    """Every job (``source_ids``, ``beam_size``, ``max_length``: python_models.nmt.decode.Job)
    in turn; ``on_done(index, ids)`` as each finishes."""
    results = []
    for index, job in enumerate(jobs):
        ids = translate_one(
            session, job.source_ids, job.beam_size, job.max_length, tokens, length_penalty
        )
        if on_done is not None:
            on_done(index, ids)
        results.append(ids)
    return results


def sequence_ids(row: Sequence[int], max_length: int, eos_token_id: int) -> list[int]:
    """One row of the TorchScript search's ``sequences`` as HF ``generate`` ids: up to the
    first EOS (kept), else the ``max_length - 1`` tokens a sentence without EOS has (the
    padding after either is not part of it; a pad id the model generated is)."""
    ids = [int(t) for t in row[: max_length - 1]]
    if eos_token_id in ids:
        return ids[: ids.index(eos_token_id) + 1]
    return ids


def torch_generate_feeds(jobs: Sequence[Any], pad_token_id: int) -> dict[str, np.ndarray]:
    """The TorchScript search's inputs for jobs of one beam size: padded ids and mask, and one
    ``num_beams`` and ``max_length`` per row."""
    from triton_kit.python_models.nmt.decode import pad_sources

    ids, mask = pad_sources(jobs, pad_token_id)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "num_beams": np.array([[job.beam_size] for job in jobs], dtype=np.int64),
        "max_length": np.array([[job.max_length] for job in jobs], dtype=np.int64),
    }


def generate_batched(
    model: str,
    jobs: Sequence[Any],
    tokens: tuple[int, int],
    on_done: Callable[[int, list[int]], None] | None = None,
) -> list[list[int]]:
    """Every job through the served TorchScript search ``model`` (BLS), one call per beam size
    with that size's jobs padded together, smaller beams first (they finish sooner).
    ``tokens``: (eos, pad)."""
    from triton_kit.python_models.common import bls

    eos, pad = tokens
    results: list[list[int]] = [[] for _ in jobs]
    for beam in sorted({job.beam_size for job in jobs}):
        index = [i for i, job in enumerate(jobs) if job.beam_size == beam]
        group = [jobs[i] for i in index]
        feeds = torch_generate_feeds(group, pad)
        sequences = bls.infer(model, feeds, [TORCH_GENERATE_OUTPUT])[0]
        for i, job, row in zip(index, group, sequences, strict=True):
            results[i] = sequence_ids(row, job.max_length, eos)
            if on_done is not None:
                on_done(i, results[i])
    return results


class BlsSession:
    """``run`` as a BLS call to the served generation model (where no file is in reach)."""

    def __init__(self, model: str) -> None:
        self.model = model

    def run(self, output_names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        from triton_kit.python_models.common import bls

        return bls.infer(self.model, feeds, list(output_names))


def graph_session(version_dir: Any, model: str, threads: int) -> Session:
    """The sibling ``model``'s ONNX file in an in-process session (no Triton round trip per
    sentence), else BLS calls to ``model``."""
    from triton_kit.python_models.common.ort_session import SessionSettings, create_session
    from triton_kit.python_models.common.sibling import sibling_onnx

    path = sibling_onnx(version_dir, model)
    if path is None:
        return BlsSession(model)
    return create_session(path, SessionSettings(intra_op_threads=threads, inter_op_threads=1))


def served_search(
    version_dir: Any, model: str, threads: int, settings: Any
) -> Callable[[Sequence[Any], Callable[[int, list[int]], None] | None], list[list[int]]]:
    """``search(jobs, on_done)`` over the sibling generation ``model``: its TorchScript
    (``model.pt``, Triton's pytorch backend, maybe on a GPU) through BLS, a beam size's
    sentences in one call; else its ONNX BeamSearch graph, one sentence a call.
    ``settings``: the served :class:`triton_kit.python_models.nmt.decode.DecodeSettings`."""
    from triton_kit.python_models.common.sibling import sibling_onnx

    if sibling_onnx(version_dir, model, "model.pt") is not None:
        tokens = (settings.eos_token_id, settings.pad_token_id)

        def batched(jobs, on_done=None):
            return generate_batched(model, jobs, tokens, on_done)

        return batched
    session = graph_session(version_dir, model, threads)
    graph_tokens = (settings.eos_token_id, settings.pad_token_id, settings.forced_eos)

    def each(jobs, on_done=None):
        return generate_each(session, jobs, graph_tokens, settings.length_penalty, on_done)

    return each
