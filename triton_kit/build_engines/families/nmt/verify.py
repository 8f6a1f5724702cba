"""Check the exported graphs against the Hugging Face model in PyTorch.

The decoder check runs the ONNX step graph token by token from an empty cache,
teacher-forced on real targets, and compares every step's logits with one full
(non-cached) forward of the Hugging Face model: that exercises the cache, the
positions and the cross-attention mask together.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from triton_kit.build_engines.families.nmt.architecture import Parity
from triton_kit.build_engines.families.nmt.export import cache_shape
from triton_kit.python_models.common.contracts import BEAM_INDEX
from triton_kit.python_models.common.ort_session import create_session, threaded


def _session(path: Path, threads: int) -> ort.InferenceSession:
    return create_session(path, threaded(threads))


def compare(
    model,
    tokenizer,
    encoder_path: Path,
    decoder_path: Path,
    sources: list[str],
    targets: list[str],
    threads: int = 2,
) -> Parity:
    batch = tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    pad = model.config.pad_token_id
    labels = batch["labels"]
    decoder_input = torch.cat([torch.full_like(labels[:, :1], pad), labels[:, :-1]], dim=1)
    with torch.no_grad():
        reference = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_input,
        )
    ids, mask = batch["input_ids"].numpy(), batch["attention_mask"].numpy()
    hidden, cross = _session(encoder_path, threads).run(
        None, {"input_ids": ids, "attention_mask": mask}
    )
    encoder_diff = float(np.abs(hidden - reference.encoder_last_hidden_state.numpy()).max())
    decoder = _session(decoder_path, threads)
    past = np.zeros(cache_shape(model, len(sources), 0), dtype=np.float32)
    decoder_diff = 0.0
    for step in range(decoder_input.shape[1]):
        feed = {
            "input_ids": decoder_input[:, step : step + 1].numpy(),
            "encoder_attention_mask": mask,
            "cross_kv": cross,
            "past_kv": past,
            BEAM_INDEX: np.arange(len(sources)),  # teacher forcing: no row moves
        }
        logits, past = decoder.run(None, feed)
        expected = reference.logits[:, step].numpy()
        decoder_diff = max(decoder_diff, float(np.abs(logits - expected).max()))
    return Parity(encoder_diff, decoder_diff)
