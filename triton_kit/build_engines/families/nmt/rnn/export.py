"""Export the recurrent model's encoder and decoder-step ONNX graphs and check them.

Tensor names and the row axis match the Transformer's graphs (see ``rnn_model``), so
the served search and ``SessionStepModel`` drive both. The check runs the ONNX step
graph token by token, teacher-forced, against one full PyTorch forward.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from triton_kit.build_engines.engines import onnx_export
from triton_kit.build_engines.families.nmt.rnn.model import RnnTranslator
from triton_kit.build_engines.families.nmt.verify import Parity


class EncoderGraph(nn.Module):
    def __init__(self, model: RnnTranslator) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model.encode(input_ids, attention_mask)


class DecoderStepGraph(nn.Module):
    """past_kv ``[layers, 1, rows, hidden]`` → GRU state ``[layers, rows, hidden]`` and back."""

    def __init__(self, model: RnnTranslator) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, encoder_attention_mask, cross_kv, past_kv):
        logits, state = self.model.decode(
            input_ids, encoder_attention_mask, cross_kv, past_kv[:, 0]
        )
        return logits[:, 0], state.unsqueeze(1)


def state_shape(model: RnnTranslator, rows: int) -> tuple[int, int, int, int]:
    return (model.config.layers, 1, rows, model.config.hidden)


# The ONNX inputs' axis names: the export's, and the dry run's before any export.
ENCODER_AXES = {
    "input_ids": {0: "batch", 1: "src_len"},
    "attention_mask": {0: "batch", 1: "src_len"},
}
DECODER_AXES = {
    "input_ids": {0: "rows"},
    "encoder_attention_mask": {0: "rows", 1: "src_len"},
    "cross_kv": {2: "rows", 3: "src_len"},
    "past_kv": {2: "rows"},
}


def export_encoder(model: RnnTranslator, path: Path) -> Path:
    ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, 139, 139]], dtype=torch.long)
    mask = (ids != 139).long()
    onnx_export.export(
        EncoderGraph(model),
        (ids, mask),
        path,
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state", "cross_kv"],
        dynamic_axes={
            **ENCODER_AXES,
            "last_hidden_state": {0: "batch", 1: "src_len"},
            "cross_kv": {2: "batch", 3: "src_len"},
        },
    )
    return onnx_export.pin_output_dims(path, {"last_hidden_state": {2: model.config.hidden}})


def export_decoder(model: RnnTranslator, path: Path) -> Path:
    rows, src_len, hidden = 3, 5, model.config.hidden
    ids = torch.full((rows, 1), 5, dtype=torch.long)
    mask = torch.ones(rows, src_len, dtype=torch.long)
    cross = torch.randn(1, 2, rows, src_len, hidden)
    past = torch.randn(state_shape(model, rows))
    return onnx_export.export(
        DecoderStepGraph(model),
        (ids, mask, cross, past),
        path,
        input_names=["input_ids", "encoder_attention_mask", "cross_kv", "past_kv"],
        output_names=["logits", "present_kv"],
        dynamic_axes={
            **DECODER_AXES,
            "logits": {0: "rows"},
            "present_kv": {2: "rows"},
        },
    )


def compare(
    model: RnnTranslator,
    encoder_path: Path,
    decoder_path: Path,
    source_ids: list[list[int]],
    target_ids: list[list[int]],
) -> Parity:
    """Max abs diff of encoder outputs and of every teacher-forced step's logits."""
    from triton_kit.python_models.nmt.ort import session

    pad = model.config.pad_token_id
    width = max(map(len, source_ids))
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in source_ids])
    mask = (ids != pad).long()
    length = max(map(len, target_ids))
    targets = [[model.config.decoder_start_token_id, *r[:-1]] for r in target_ids]
    decoder_in = torch.tensor([r + [pad] * (length - len(r)) for r in targets])
    with torch.no_grad():
        memory, cross_ref = model.encode(ids, mask)
        reference = model(ids, mask, decoder_in).numpy()
    memory_onnx, cross = session(encoder_path, 1).run(
        None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    )
    encoder_diff = max(
        float(np.abs(memory_onnx - memory.numpy()).max()),
        float(np.abs(cross - cross_ref.numpy()).max()),
    )
    decoder = session(decoder_path, 1)
    past = np.zeros(state_shape(model, len(source_ids)), dtype=np.float32)
    decoder_diff = 0.0
    for step in range(length):
        feed = {
            "input_ids": decoder_in[:, step : step + 1].numpy(),
            "encoder_attention_mask": mask.numpy(),
            "cross_kv": cross,
            "past_kv": past,
        }
        logits, past = decoder.run(None, feed)
        decoder_diff = max(decoder_diff, float(np.abs(logits - reference[:, step]).max()))
    return Parity(encoder_diff, decoder_diff)
