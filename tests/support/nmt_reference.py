"""Shared helpers for the NMT tests: Hugging Face ``generate`` as the reference."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from build_engines.nmt.pipeline import decode_settings, limits
from python_models.nmt.decode import DecodeSettings, Job, generate
from python_models.nmt.ort import OrtStepModel
from python_models.nmt.text import MarianText

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
