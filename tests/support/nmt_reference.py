"""Shared helpers for the NMT tests: Hugging Face ``generate`` as the reference."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from triton_kit.build_engines.families.nmt.transformer import decode_settings, limits
from triton_kit.python_models.nmt.decode import DecodeSettings, Job, generate
from triton_kit.python_models.nmt.ort import OrtStepModel
from triton_kit.python_models.nmt.text import MarianText

warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")


def hf_generate(
    model, tokenizer, texts: Sequence[str], beam: int, max_length: int, length_penalty: float
) -> list[list[int]]:
    """Token ids HF produces, start token and trailing padding removed."""
    batch = tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True)
    with torch.no_grad():
        out = model.generate(
            **batch,
            num_beams=beam,
            max_length=max_length,
            length_penalty=length_penalty,
            do_sample=False,
        )
    pad = model.config.pad_token_id
    rows = []
    for row in out.tolist():
        row = row[1:]
        while row and row[-1] == pad:
            row.pop()
        rows.append(row)
    return rows


def hf_translator(checkpoint: Path):
    """``translate(texts, beam, max_length=64) -> texts``: HF ``generate`` on a Marian
    checkpoint (length penalty 1), decoded by its ``MarianTokenizer``."""
    from transformers import MarianMTModel, MarianTokenizer

    model = MarianMTModel.from_pretrained(str(checkpoint)).eval()
    tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))

    def translate(texts: list[str], beam: int, max_length: int = 64) -> list[str]:
        ids = hf_generate(model, tokenizer, texts, beam, max_length, length_penalty=1.0)
        return tokenizer.batch_decode(ids, skip_special_tokens=True)

    return translate


class InProcess:
    """The served decode code on in-process ONNX Runtime, for one exported checkpoint."""

    def __init__(self, model, version_dir: Path, encoder: Path, decoder: Path) -> None:
        self.settings = decode_settings(model)
        self.limits = limits(model, 16)
        self.text = MarianText(version_dir, self.limits.max_source_length)
        self.runner = OrtStepModel(encoder, decoder, threads=2)

    def ids(
        self, texts: Sequence[str], beam: int, max_length: int, length_penalty: float | None = None
    ) -> list[list[int]]:
        settings: DecodeSettings = self.settings
        if length_penalty is not None:
            settings = dataclasses.replace(settings, length_penalty=length_penalty)
        jobs = [Job(self.text.encode(t), beam, max_length) for t in texts]
        return generate(self.runner, jobs, settings)

    def translate(self, texts: Sequence[str], beam: int, max_length: int) -> list[str]:
        return [self.text.decode(ids) for ids in self.ids(texts, beam, max_length)]


def rnn_reference_search(model, source: list[int], beam: int, max_length: int = 64):
    """HF-style beam search (length penalty 1, early_stopping False, <pad> banned, eos
    forced at the limit) over the recurrent model
    (``triton_kit.build_engines.families.nmt.rnn.model``), one sentence at a time in plain PyTorch
    (nothing of python_models' search). At beam 1 it is greedy (an EOS on top ends the sentence,
    HF's stop check ends the rest)."""
    config = model.config
    pad, eos, vocab = config.pad_token_id, config.eos_token_id, config.vocab_size
    ids = torch.tensor([source])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        _, cross = model.encode(ids, mask)
    beams = [[config.decoder_start_token_id]]
    scores = torch.zeros(1)
    state = torch.zeros(config.layers, 1, config.hidden)
    finished: list[tuple[float, list[int]]] = []
    for cur_len in range(1, max_length):
        rows = len(beams)
        last = torch.tensor([[b[-1]] for b in beams])
        with torch.no_grad():
            logits, state = model.decode(
                last, mask.expand(rows, -1), cross.expand(-1, -1, rows, -1, -1), state
            )
        log_probs = torch.log_softmax(logits[:, -1], dim=-1)
        log_probs[:, pad] = -float("inf")
        if cur_len == max_length - 1:
            log_probs[:, :] = -float("inf")
            log_probs[:, eos] = 0.0
        totals = (log_probs + scores[:, None]).reshape(-1)
        top = torch.topk(totals, min(2 * beam, totals.numel()))
        running, origins, new_scores = [], [], []
        for rank, (score, index) in enumerate(
            zip(top.values.tolist(), top.indices.tolist(), strict=True)
        ):
            origin, token = divmod(index, vocab)
            sequence = [*beams[origin], token]
            if token == eos:
                if rank < beam:
                    finished.append((score / cur_len, sequence))
            elif len(running) < beam:
                running.append(sequence)
                origins.append(origin)
                new_scores.append(score)
        finished = sorted(finished, key=lambda item: -item[0])[:beam]
        if not running:
            break
        if len(finished) == beam and new_scores[0] / cur_len <= finished[-1][0]:
            break
        beams, scores = running, torch.tensor(new_scores)
        state = state[:, origins]
    return finished[0][1][1:]
