"""Marian generation as ONE TorchScript module: encoder once, then the whole search on the device.

``python -m triton_kit.build_engines nmt --engine torch --search engine`` writes it as
``nmt_generate``, served by Triton's own pytorch backend; the ``nmt`` python model only
tokenises, calls it once per beam size of a batch and detokenises
(triton_kit/python_models/nmt/generate.py). No Python runs between steps, and the KV cache,
the scores and the top-k never leave the device.

The model calls are the architecture's
(:meth:`~triton_kit.build_engines.families.nmt.architecture.Architecture.search_steps`): an
encoder returning the cross state (axis 2 the row) and a decoder step driven through the
:class:`~triton_kit.build_engines.families.nmt.torchscript.row_step.SearchStep` methods
(``begin`` a call's state, ``step`` one position for the live rows, each continuing a row of the
last step, ``expand`` to the beams, ``keep`` the live sentences). The Transformer's are scripted
for the search (:mod:`~triton_kit.build_engines.families.nmt.torchscript.search_encoder`,
:mod:`~triton_kit.build_engines.families.nmt.torchscript.cached_step`: a KV cache allocated once
a call and written in place, the encoder keys shared by a sentence's beams, fused attention on
CPU); the recurrent model's ``nmt_rnn_generate`` drives its traced reordering step through
:class:`~triton_kit.build_engines.families.nmt.torchscript.row_step.RowStep`. All in the build's
dtype. Around them, Hugging Face ``generate`` (transformers 5.x) for Marian:

- greedy (``num_beams == 1``): HF ``_sample`` without sampling, the processors on the float32
  logits, argmax;
- beam search: HF's vectorised ``_beam_search`` (``_get_top_k_continuations``,
  ``_get_running_beams_for_next_iteration``, ``_update_finished_beams``,
  ``_check_early_stop_heuristic``), log-softmax in float32 before the processors;
- processors: ``bad_words_ids`` of single tokens (-inf), ``forced_eos_token_id`` at
  ``max_length - 1``; ``length_penalty`` and ``early_stopping`` as in the checkpoint's
  generation config (module constants, baked in at build time).

Each row has its own ``max_length`` (forced EOS and stopping per row), so a row's ids are
those HF gives it in a batch of its own ``max_length``. A sentence leaves the batch the step
it is finished (HF's per-sentence stop conditions: all candidates ended, the beams are full
with ``early_stopping=True``, or no running beam can beat the worst finished one): its rows
are dropped from every state (cross K/V, mask, cache, running tensors), not computed on. The
only host sync per step is the count of finished sentences, which is also the loop condition;
the per-row limit checks start at the step the shortest limit can end a row.

The first beam step decodes one row per sentence (the ``num_beams`` copies HF runs are
identical); its scores are laid out as HF's ``[batch, num_beams * vocab]`` with ``-1e9`` for
the copies, so the top-k (and its ties) is HF's own.
"""

# No ``from __future__ import annotations``: TorchScript reads the class annotations as objects.
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from triton_kit.python_models.nmt.decode import DecodeSettings, Job, OnDone
from triton_kit.python_models.nmt.generate import (
    TORCH_GENERATE_OUTPUT,
    sequence_ids,
    torch_generate_feeds,
)

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Architecture

_NEG = -1.0e9  # HF's "not this one" score offset
# What a frozen module keeps for its Python callers (generate, run_module).
PRESERVED = ("eos_id", "pad_id", "anchor")
_EARLY_STOPPING = {False: 0, True: 1, "never": 2}


class GenerationModule(nn.Module):
    """``forward(input_ids [B, S], attention_mask [B, S], num_beams [B, 1] or [1],
    max_length [B, 1] or [B]) -> sequences [B, L]``: HF ``generate``'s ids without the start
    token, EOS kept, padded with ``pad_token_id`` to the longest (all int64). One beam size
    per call (every row's ``num_beams`` must agree)."""

    suppressed: list[int]  # in the class body: TorchScript cannot type an empty list

    def __init__(self, encoder: nn.Module, decoder: nn.Module, settings: DecodeSettings) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        # empty, on the module's device: where run_module puts the inputs (a frozen module
        # keeps no parameters to ask)
        self.register_buffer("anchor", torch.zeros(0, device=_device(encoder)))
        self.neg: float = _NEG
        self.start_id: int = settings.decoder_start_token_id
        self.eos_id: int = settings.eos_token_id
        self.pad_id: int = settings.pad_token_id
        self.suppressed = [int(t) for t in settings.suppressed_token_ids]
        self.forced_eos: bool = bool(settings.forced_eos)
        self.length_penalty: float = float(settings.length_penalty)
        self.early_stopping: int = _EARLY_STOPPING[settings.early_stopping]

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, num_beams: Tensor, max_length: Tensor
    ) -> Tensor:
        beams = num_beams.reshape(-1)
        beam = int(beams[0])
        if bool((beams != beam).any()):
            raise ValueError("nmt_generate: every row of one call must have the same num_beams")
        limits = max_length.reshape(-1).to(device=input_ids.device, dtype=torch.long)
        if limits.numel() != input_ids.shape[0]:
            raise ValueError("nmt_generate: max_length needs one value per row of input_ids")
        if bool((limits < 2).any()):
            raise ValueError("nmt_generate: max_length counts the start token and must be >= 2")
        cross = self.encoder(input_ids, attention_mask)[1]
        # On the device once a call (a tensor made from a list each step is a blocking copy).
        banned = torch.tensor(self.suppressed, dtype=torch.long, device=input_ids.device)
        # Before this length no row is at its limit: the limit checks are skipped until then.
        shortest = int(limits.min())
        if beam == 1:
            return self._greedy(cross, attention_mask, limits, banned, shortest)
        return self._beam(cross, attention_mask, limits, beam, banned, shortest)

    def _process(self, scores: Tensor, forced: Tensor | None, banned: Tensor) -> Tensor:
        """Marian's processors on float32 scores: banned ids -inf; where ``forced`` (a row at
        its ``max_length - 1``; None: no row is), -inf everywhere but EOS, which scores 0."""
        if len(self.suppressed) > 0:
            scores = scores.index_fill(1, banned, float("-inf"))
        if self.forced_eos and forced is not None:
            only_eos = torch.full_like(scores[:1], float("-inf"))
            only_eos[:, self.eos_id] = 0.0
            scores = torch.where(forced[:, None], only_eos, scores)
        return scores

    def _greedy(
        self, cross: Tensor, mask: Tensor, limits: Tensor, banned: Tensor, shortest: int
    ) -> Tensor:
        rows = mask.shape[0]
        device = mask.device
        width = int(limits.max()) - 1
        out = torch.full([rows, width], self.pad_id, dtype=torch.long, device=device)
        generated = out.clone()  # the live rows' tokens
        sentence = torch.arange(rows, device=device)  # batch row of each live row
        tokens = torch.full([rows, 1], self.start_id, dtype=torch.long, device=device)
        state = self.decoder.begin(cross, mask, width, 1)
        beam_index: Tensor | None = None  # None: the same rows as the last step
        cur_len = 1
        while True:
            logits, state = self.decoder.step(tokens, state, beam_index, cur_len - 1, 1)
            at_limit = cur_len + 1 >= shortest  # some row may be at its max_length
            forced = limits - 1 == cur_len if at_limit else None
            chosen = self._process(logits.float(), forced, banned).argmax(dim=-1)
            generated[:, cur_len - 1] = chosen
            done = chosen == self.eos_id
            if at_limit:
                done = done | (limits <= cur_len + 1)
            cur_len += 1
            finished = int(done.sum())  # the one host sync a step
            live = sentence.shape[0]
            if finished == 0:
                tokens = chosen[:, None]
                beam_index = None
                continue
            order = torch.sort(done.to(torch.int8), stable=True)[1]  # live rows first
            leaving = order[live - finished :]
            rows_out = sentence.index_select(0, leaving)
            out.index_copy_(0, rows_out, generated.index_select(0, leaving))
            if finished == live:
                break
            keep = order[: live - finished]
            sentence, generated = sentence.index_select(0, keep), generated.index_select(0, keep)
            limits = limits.index_select(0, keep)
            state = self.decoder.keep(state, keep, 1)
            tokens = chosen.index_select(0, keep)[:, None]
            beam_index = keep
        return out[:, : cur_len - 1]

    def _beam(
        self,
        cross: Tensor,
        mask: Tensor,
        limits: Tensor,
        beam: int,
        banned: Tensor,
        shortest: int,
    ) -> Tensor:
        """HF ``_beam_search`` over [sentence, beam] tensors, finished sentences dropped."""
        count = mask.shape[0]
        device = mask.device
        width = int(limits.max())
        keep_k = 2 * beam  # HF's beams_to_keep with one EOS id
        top_mask = torch.arange(keep_k, device=device) < beam
        out = torch.full([count, width - 1], self.pad_id, dtype=torch.long, device=device)
        running = torch.full([count, beam, width], self.pad_id, dtype=torch.long, device=device)
        running[:, :, 0] = self.start_id
        finished_seqs = running.clone()
        running_scores = torch.zeros([count, beam], dtype=torch.float, device=device)
        running_scores[:, 1:] = self.neg
        finished_scores = torch.full([count, beam], self.neg, dtype=torch.float, device=device)
        finished_lengths = torch.zeros([count, beam], dtype=torch.long, device=device)
        is_finished = torch.zeros([count, beam], dtype=torch.bool, device=device)
        improvable = torch.ones([count, 1], dtype=torch.bool, device=device)
        sentence = torch.arange(count, device=device)
        longest = torch.zeros([], dtype=torch.long, device=device)
        tokens = torch.full([count, 1], self.start_id, dtype=torch.long, device=device)
        state = self.decoder.begin(cross, mask, width - 1, beam)
        beam_index: Tensor | None = None
        rows_per_sentence = 1  # the first step decodes one row per sentence
        cur_len = 1
        while True:
            logits, state = self.decoder.step(
                tokens, state, beam_index, cur_len - 1, rows_per_sentence
            )
            live = sentence.shape[0]
            log_probs = torch.log_softmax(logits.float(), dim=-1)
            at_limit = cur_len + 1 >= shortest  # some sentence may be at its max_length
            forced: Tensor | None = None
            if at_limit:
                forced = (limits - 1 == cur_len).repeat_interleave(rows_per_sentence)
            log_probs = self._process(log_probs, forced, banned)
            vocab = log_probs.shape[1]
            if keep_k > vocab:
                raise ValueError("nmt_generate: num_beams must be at most half the vocabulary")
            log_probs = log_probs.view(live, rows_per_sentence, vocab)
            if rows_per_sentence == 1:  # HF's layout: the beam copies, scored -1e9
                log_probs = log_probs.expand(live, beam, vocab)
            totals = (log_probs + running_scores[:, :, None]).reshape(live, beam * vocab)
            # c. HF _get_top_k_continuations
            top_scores, top_indices = torch.topk(totals, keep_k)
            origins = torch.div(top_indices, vocab, rounding_mode="floor")
            top_tokens = top_indices % vocab
            top_seqs = running.gather(1, origins[:, :, None].expand(live, keep_k, width))
            top_seqs[:, :, cur_len] = top_tokens
            # d. stopping criteria: EOS, or this row's max_length
            hits = top_tokens == self.eos_id
            if at_limit:
                hits = hits | (limits[:, None] <= cur_len + 1)
            # e. HF _get_running_beams_for_next_iteration
            penalised = top_scores + hits.to(torch.float) * self.neg
            chosen = torch.topk(penalised, beam)[1]
            running = top_seqs.gather(1, chosen[:, :, None].expand(live, beam, width))
            running_scores = penalised.gather(1, chosen)
            continues = origins.gather(1, chosen)
            # f. HF _update_finished_beams
            just_finished = hits & top_mask[None, :]
            normalised = top_scores / (float(cur_len) ** self.length_penalty)
            if self.early_stopping == 1:
                full = is_finished.all(dim=-1, keepdim=True)
                normalised = normalised + full.to(torch.float) * self.neg
            normalised = normalised + (~improvable).to(torch.float) * self.neg
            normalised = normalised + (~just_finished).to(torch.float) * self.neg
            merged_scores = torch.cat([finished_scores, normalised], dim=1)
            best = torch.topk(merged_scores, beam)[1]
            merged_seqs = torch.cat([finished_seqs, top_seqs], dim=1)
            finished_seqs = merged_seqs.gather(1, best[:, :, None].expand(live, beam, width))
            finished_scores = merged_scores.gather(1, best)
            new_lengths = torch.full_like(top_tokens, cur_len)
            finished_lengths = torch.cat([finished_lengths, new_lengths], dim=1).gather(1, best)
            is_finished = torch.cat([is_finished, just_finished], dim=1).gather(1, best)
            # g. HF _check_early_stop_heuristic, at the next length
            cur_len += 1
            improvable = self._improvable(
                improvable, running_scores, finished_scores, is_finished, cur_len, limits
            )
            done = ~improvable[:, 0] | hits.all(dim=-1)
            if self.early_stopping == 1:
                done = done | is_finished.all(dim=-1)
            step_rows = (
                torch.arange(live, device=device)[:, None] * rows_per_sentence + continues
            ).reshape(-1)
            if rows_per_sentence == 1:  # every sentence's row now feeds its beams
                state = self.decoder.expand(state, beam)
                rows_per_sentence = beam
            finished = int(done.sum())  # the one host sync a step
            if finished > 0:
                order = torch.sort(done.to(torch.int8), stable=True)[1]  # live sentences first
                leaving = order[live - finished :]
                best_seqs = finished_seqs.index_select(0, leaving)[:, 0, 1:]
                out.index_copy_(0, sentence.index_select(0, leaving), best_seqs)
                lengths = finished_lengths.index_select(0, leaving)[:, 0]
                longest = torch.maximum(longest, lengths.max())
                if finished == live:
                    break
                keep = order[: live - finished]
                sentence, limits = sentence.index_select(0, keep), limits.index_select(0, keep)
                running, running_scores = running[keep], running_scores[keep]
                finished_seqs, finished_scores = finished_seqs[keep], finished_scores[keep]
                finished_lengths, is_finished = finished_lengths[keep], is_finished[keep]
                improvable = improvable[keep]
                state = self.decoder.keep(state, keep, beam)
                step_rows = step_rows.view(live, beam).index_select(0, keep).reshape(-1)
            tokens = running[:, :, cur_len - 1].reshape(-1, 1)
            beam_index = step_rows
        return out[:, : int(longest)]

    def _improvable(
        self,
        improvable: Tensor,
        running_scores: Tensor,
        finished_scores: Tensor,
        is_finished: Tensor,
        cur_len: int,
        limits: Tensor,
    ) -> Tensor:
        """HF ``_check_early_stop_heuristic`` (decoder prompt of one token), per row limits."""
        if self.early_stopping == 2 and self.length_penalty > 0.0:
            length = (limits - 1).to(torch.double).pow(self.length_penalty).to(torch.float)
            best_running = running_scores[:, :1] / length[:, None]
        else:
            best_running = running_scores[:, :1] / (float(cur_len - 1) ** self.length_penalty)
        worst = finished_scores.min(dim=1, keepdim=True)[0]
        worst_finished = torch.where(is_finished, worst, torch.full_like(worst, self.neg))
        return improvable & (best_running > worst_finished).any(dim=-1, keepdim=True)


def generation_module(
    architecture: "Architecture",
    model: nn.Module | Path,
    settings: DecodeSettings,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    int8_dynamic: bool = False,
) -> torch.jit.ScriptModule:
    """The scripted search over ``architecture``'s model (or its checkpoint directory): what
    ``nmt_generate``/``nmt_rnn_generate`` serve, and what the benchmarks time in-process. Works
    on a copy of the model's weights in ``dtype``, with ``int8_dynamic`` its layers quantised
    (the model itself is left as it is)."""
    import copy

    if not isinstance(model, nn.Module):
        model = architecture.load(Path(model))
    model = copy.deepcopy(model).eval()
    encoder, decoder = architecture.search_steps(
        model, settings, torch.device(device), dtype, int8_dynamic
    )
    # No weight requires grad: the decoder step writes its cache in place (``out=``), which
    # autograd refuses there (a caller outside no_grad or inference mode).
    search = GenerationModule(encoder, decoder, settings).eval().requires_grad_(False)
    # Frozen: weights and settings become constants of one inlined graph, with no method call
    # per submodule and no attribute lookups left for the interpreter at every step.
    return torch.jit.freeze(torch.jit.script(search), preserved_attrs=list(PRESERVED))


def _device(module: nn.Module) -> torch.device:
    """Where ``module``'s first parameter or buffer lives (CPU where it has none)."""
    for tensor in [*module.parameters(), *module.buffers()]:
        return tensor.device
    return torch.device("cpu")


def save(module: torch.jit.ScriptModule, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    module.save(str(path))
    return path


def generate(
    module: nn.Module, jobs: Sequence[Job], on_done: OnDone | None = None
) -> list[list[int]]:
    """Ids per job (start token off, EOS kept), as
    :func:`triton_kit.python_models.nmt.decode.generate` returns them (``on_done(index, ids)``
    as each beam size's call returns): one module call per beam size, the jobs of that size
    padded together, on the module's device."""
    results: list[list[int]] = [[] for _ in jobs]
    for beam in dict.fromkeys(job.beam_size for job in jobs):
        index = [i for i, job in enumerate(jobs) if job.beam_size == beam]
        group = [jobs[i] for i in index]
        sequences = run_module(module, group)
        for i, job, row in zip(index, group, sequences, strict=True):
            results[i] = sequence_ids(row, job.max_length, module.eos_id)
            if on_done is not None:
                on_done(i, results[i])
    return results


def run_module(module: nn.Module, jobs: Sequence[Job]) -> np.ndarray:
    """One call of the module on ``jobs`` (one beam size): ``sequences`` as numpy (the copy
    to the host waits for the device, so a timer around this times the search)."""
    feeds = torch_generate_feeds(jobs, module.pad_id)
    device = module.anchor.device
    with torch.inference_mode():
        out = module(*(torch.from_numpy(v).to(device) for v in feeds.values()))
    return out.cpu().numpy()


OUTPUT = TORCH_GENERATE_OUTPUT
__all__ = [
    "OUTPUT",
    "GenerationModule",
    "generate",
    "generation_module",
    "run_module",
    "save",
]
