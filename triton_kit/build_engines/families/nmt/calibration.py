"""INT8 calibration data for the encoder and the KV-cache decoder.

The decoder's inputs (self-attention cache of every length, beam rows) only exist
while decoding, so they are captured from a real FP32 beam search over sentences
outside the held-out split, with the same search code the server runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.serving import CalibrationSource
from triton_kit.python_models.common.contracts import decoder_feed
from triton_kit.python_models.nmt.decode import DecodeSettings, Job, generate
from triton_kit.python_models.nmt.ort import OrtStepModel
from triton_kit.python_models.nmt.text import MarianText

Feeds = dict[str, np.ndarray]


def calibration_sentences(checkpoint: Path, count: int, seed: int = 99) -> list[str]:
    """Number phrases the held-out split (if any) does not contain."""
    split_file = checkpoint / "split.json"
    excluded = corpus.Split.load(split_file).held_out() if split_file.exists() else set()
    rng = np.random.default_rng(seed)
    numbers = [int(n) for n in rng.integers(0, 1_000_000, size=4 * count)]
    return [corpus.english(n) for n in numbers if n not in excluded][:count]


class _Recorder(OrtStepModel):
    """The FP32 step model, keeping a copy of what each graph was fed."""

    def __init__(self, encoder: Path, decoder: Path) -> None:
        super().__init__(encoder, decoder)
        self.encoder_feeds: list[Feeds] = []
        self.decoder_feeds: list[Feeds] = []

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        self.encoder_feeds.append({"input_ids": input_ids, "attention_mask": attention_mask})
        return super().encode(input_ids, attention_mask)

    def step(self, input_ids, attention_mask, cross_kv, past_kv, beam_index=None):
        feed = decoder_feed(input_ids, attention_mask, cross_kv, past_kv, beam_index)
        self.decoder_feeds.append(feed)
        return super().step(input_ids, attention_mask, cross_kv, past_kv, beam_index)


def calibration_sources(
    checkpoint: Path,
    encoder_onnx: Path,
    decoder_onnx: Path,
    settings: DecodeSettings,
    max_source_length: int,
    count: int = 64,
    beam_size: int = 4,
) -> dict[str, CalibrationSource]:
    """Sources for ``nmt_encoder`` and ``nmt_decoder``; decoding runs once, on first use."""
    captured: dict[str, list[Feeds]] = {}

    def capture() -> dict[str, list[Feeds]]:
        if not captured:
            text = MarianText(checkpoint, max_source_length)
            recorder = _Recorder(encoder_onnx, decoder_onnx)
            sentences = calibration_sentences(checkpoint, count)
            for start in range(0, len(sentences), 8):
                jobs = [Job(text.encode(s), beam_size, 64) for s in sentences[start : start + 8]]
                generate(recorder, jobs, settings)
            captured["nmt_encoder"] = recorder.encoder_feeds
            # Every other step: a spread of cache lengths without near-duplicates.
            captured["nmt_decoder"] = recorder.decoder_feeds[::2]
        return captured

    return {
        name: (lambda name=name: iter(capture()[name])) for name in ("nmt_encoder", "nmt_decoder")
    }
