"""Calls to the generation model ``nmt_generate``, served by one of Triton's own backends, and
its output read back as Hugging Face ``generate`` ids. The ``nmt`` python model tokenises, pads
its batch, makes the call by BLS and detokenises; it runs no engine itself. Two kinds:

- ONNX Runtime's BeamSearch operator over Marian's encoder and decoder, inside a Loop over the
  batch's rows (Triton's onnxruntime backend; triton_kit/build_engines/families/nmt/
  generation_graph.py): ONE call per batch, every row with its own beam size and limit;
- the TorchScript search (``--engine torch``, Triton's pytorch backend, a GPU where the build put
  it): one call per beam size of a batch (the module takes one beam size a call), its sentences
  batched exactly;
- CTranslate2 (``--engine ctranslate2``, ``nmt_ct2``, the kit's own ctranslate2 backend): ONE
  call per batch, every row with its own beam size and limit.

Why the Loop, one sentence at a time inside the engine: the operator's CPU scorer decides a
sentence is done from the candidate scores at ``batch * num_beams`` instead of ``batch * 2 *
num_beams`` (onnxruntime ``beam_search_scorer.cc``, ``next_scores.subspan(batch * num_beams_,
top_k)``, 1.32 and its main branch), so in a batch of several sentences each one stops on its
neighbours' scores: sentences end early or late against HF (2 of 64 held-out sentences
differed at beam 4), and the batch runs to ``max_length`` (32 sentences, beam 4: 420 against
122 ms at ``max_length`` 64 and 24). With one sentence the scores it reads are its own.

One difference with HF remains at beam > 1: the operator stops a sentence when the best
of all ``2 * beam`` candidates (EOS ones included) cannot beat its worst finished
hypothesis, HF when its best running beam cannot. It may search on after HF stops, and then
returns a hypothesis that HF's own score ranks higher (tests/build/build_engines/
test_nmt_generation_graph.py: every held-out test sentence of the number model identical;
0 to 5 of 24 on a random Marian built to end at varied lengths).

The graph's ``sequences`` hold the start token, the tokens, then pad; a hypothesis that
ended on EOS is stored without it. HF's ids keep the EOS, so it is put back on every
sequence shorter than the limit (one at the limit was cut there: no EOS, Marian's forced
EOS aside, which the graph applies itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

GRAPH_OUTPUT = "sequences"
# The kit's ctranslate2 backend (``nmt_ct2``, triton_kit/server/native_backends/ctranslate2):
# Marian's source ids in, -1 padded; target ids out (no start token, no EOS), -1 padded.
CT2_SOURCE, CT2_BEAM, CT2_LENGTH = "SOURCE_IDS", "BEAM_SIZE", "MAX_DECODING_LENGTH"
CT2_OUTPUT = "TARGET_IDS"
CT2_PAD = -1
# CTranslate2 ends a beam search once beam_size x patience hypotheses have finished (HF's
# early_stopping=True); these checkpoints' generation configs say early_stopping=False (HF
# goes on while a running beam can still win). With patience 1 the search returned degenerate
# early finishers for 14-19 % of sentences; with 2 it returns HF's translations.
CT2_PATIENCE = 2
TORCH_GENERATE_OUTPUT = "sequences"  # the TorchScript search's [rows, length] int64 ids
MIN_GRAPH_MAX_LENGTH = 3  # at 2 the operator skips its first step and reads garbage (1.32)


# (feeds) -> sequences: a BLS call to the served graph, or an in-process session's run
GraphRun = Callable[[dict[str, np.ndarray]], np.ndarray]


def graph_feeds(
    jobs: Sequence[Any], pad_token_id: int, length_penalty: float
) -> dict[str, np.ndarray]:
    """The generation graph's inputs for a batch: ids and mask padded on the right (int32),
    one ``num_beams`` and ``max_length`` per row, the model's ``length_penalty``."""
    from triton_kit.python_models.nmt.decode import pad_sources

    ids, mask = pad_sources(jobs, pad_token_id)
    return {
        "input_ids": ids.astype(np.int32),
        "attention_mask": mask.astype(np.int32),
        "num_beams": np.array([job.beam_size for job in jobs], dtype=np.int32),
        "max_length": np.array([job.max_length for job in jobs], dtype=np.int32),
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


def generate_graph(
    run: GraphRun,
    jobs: Sequence[Any],
    tokens: tuple[int, int, bool],
    length_penalty: float,
    on_done: Callable[[int, list[int]], None] | None = None,
) -> list[list[int]]:
    """Every job (``source_ids``, ``beam_size``, ``max_length``: python_models.nmt.decode.Job)
    through the generation graph in ONE ``run``; ``tokens``: (eos, pad, forced_eos);
    ``on_done(index, ids)`` for each. A row whose limit leaves no step (``max_length`` 2: the
    operator would skip its first step and read garbage, 1.32) is answered here: HF forces EOS
    there, the only possible output."""
    eos, pad, forced_eos = tokens
    results: list[list[int]] = [[] for _ in jobs]
    short = [i for i, job in enumerate(jobs) if job.max_length < MIN_GRAPH_MAX_LENGTH]
    if short and not forced_eos:
        raise ValueError(f"max_length must be at least {MIN_GRAPH_MAX_LENGTH} for this model")
    index = [i for i in range(len(jobs)) if i not in set(short)]
    if index:
        sequences = run(graph_feeds([jobs[i] for i in index], pad, length_penalty))
        for i, row in zip(index, sequences, strict=True):
            results[i] = hf_ids(row, jobs[i].max_length, eos, pad)
    for i in short:
        results[i] = [eos]
    if on_done is not None:
        for i, ids in enumerate(results):
            on_done(i, ids)
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


def ct2_feeds(jobs: Sequence[Any]) -> dict[str, np.ndarray]:
    """The ctranslate2 backend's inputs for a batch: ids padded with -1 on the right, one beam
    size and decoding limit per row (HF's ``max_length`` counts the start token: minus one)."""
    width = max(len(job.source_ids) for job in jobs)
    ids = np.full((len(jobs), width), CT2_PAD, dtype=np.int32)
    for row, job in enumerate(jobs):
        ids[row, : len(job.source_ids)] = job.source_ids
    return {
        CT2_SOURCE: ids,
        CT2_BEAM: np.array([[job.beam_size] for job in jobs], dtype=np.int32),
        CT2_LENGTH: np.array([[job.max_length - 1] for job in jobs], dtype=np.int32),
    }


def generate_ct2(
    model: str,
    jobs: Sequence[Any],
    eos_token_id: int,
    on_done: Callable[[int, list[int]], None] | None = None,
) -> list[list[int]]:
    """Every job through the served CTranslate2 ``model`` in ONE BLS call (the backend makes
    one ``translate_batch`` per beam size and limit); ids as HF's, EOS put back where the
    hypothesis is shorter than its limit."""
    from triton_kit.python_models.common import bls

    rows = bls.infer(model, ct2_feeds(jobs), [CT2_OUTPUT])[0]
    results = []
    for index, (job, row) in enumerate(zip(jobs, rows, strict=True)):
        ids = row[row != CT2_PAD].tolist()  # Python ints (a loop over numpy scalars was the
        # stub's costliest line: docs/nmt_ct2_stub.md)
        if len(ids) < job.max_length - 1:
            ids.append(eos_token_id)
        results.append(ids)
        if on_done is not None:
            on_done(index, ids)
    return results


def serves_ct2(version_dir: Any, model: str) -> bool:
    """Whether the sibling ``model`` is served by the kit's ctranslate2 backend (its
    ``model.bin``): ONE call answers a batch of any beam sizes."""
    from triton_kit.python_models.common.sibling import sibling_file

    return sibling_file(version_dir, model, "model.bin") is not None


def served_search(
    version_dir: Any, model: str, settings: Any
) -> Callable[[Sequence[Any], Callable[[int, list[int]], None] | None], list[list[int]]]:
    """``search(jobs, on_done)`` through BLS calls to the sibling generation ``model``, which a
    Triton backend serves: its TorchScript (``model.pt``, the pytorch backend, maybe on a GPU),
    a beam size's sentences a call; else its ONNX graph (the onnxruntime backend), the whole
    batch in one call. ``settings``: the served
    :class:`triton_kit.python_models.nmt.decode.DecodeSettings`."""
    from triton_kit.python_models.common import bls
    from triton_kit.python_models.common.sibling import sibling_file

    if serves_ct2(version_dir, model):  # the kit's ctranslate2 backend

        def ct2(jobs, on_done=None):
            return generate_ct2(model, jobs, settings.eos_token_id, on_done)

        return ct2
    if sibling_file(version_dir, model, "model.pt") is not None:
        tokens = (settings.eos_token_id, settings.pad_token_id)

        def batched(jobs, on_done=None):
            return generate_batched(model, jobs, tokens, on_done)

        return batched
    graph_tokens = (settings.eos_token_id, settings.pad_token_id, settings.forced_eos)

    def call(feeds: dict[str, np.ndarray]) -> np.ndarray:
        return bls.infer(model, feeds, [GRAPH_OUTPUT])[0]

    def whole_batch(jobs, on_done=None):
        return generate_graph(call, jobs, graph_tokens, settings.length_penalty, on_done)

    return whole_batch
