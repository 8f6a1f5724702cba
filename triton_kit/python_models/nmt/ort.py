"""The decode loop's model calls on in-process ONNX Runtime sessions.

The in-process baseline for tests and benchmarks: the same :mod:`nmt_decode`
search as the Triton BLS model, with the two graphs run directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from triton_kit.python_models.common.contracts import BEAM_INDEX, decoder_feed
from triton_kit.python_models.common.ort_session import SessionSettings, create_session
from triton_kit.python_models.nmt.candidates import OrtCandidates


def session(path: Path, threads: int) -> ort.InferenceSession:
    return create_session(path, SessionSettings(intra_op_threads=threads, inter_op_threads=1))


class SessionStepModel:
    """``encode``/``step`` (see :class:`triton_kit.python_models.nmt.decode.StepModel`) over two
    objects with ONNX Runtime's ``run(None, feeds)``: sessions, or stand-ins that call a server.

    Outputs are taken by position, in the exported graphs' order: the encoder gives
    (last_hidden_state, cross_kv), the decoder (logits, present_kv). ``reorders``: the
    decoder takes ``beam_index`` (the Transformer's; the RNN decoder has none), read from
    the decoder's inputs where it lists them, else given.
    """

    def __init__(self, encoder: Any, decoder: Any, reorders: bool | None = None) -> None:
        self.encoder = encoder
        self.decoder = decoder
        self.reorders = _takes_beam_index(decoder) if reorders is None else reorders

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        return self.encoder.run(None, feed)[1]

    def step(
        self,
        input_ids: np.ndarray,
        attention_mask: np.ndarray,
        cross_kv: np.ndarray,
        past_kv: np.ndarray,
        beam_index: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        feed = decoder_feed(input_ids, attention_mask, cross_kv, past_kv, beam_index)
        if not isinstance(self.decoder, ort.InferenceSession):
            logits, present = self.decoder.run(None, feed)[:2]
            return logits, present
        return _run_bound(self.decoder, feed)


def _takes_beam_index(decoder: Any) -> bool:
    """Whether a decoder (a session, or a stand-in that lists its inputs) has ``beam_index``."""
    inputs = getattr(decoder, "get_inputs", None)
    return inputs is not None and BEAM_INDEX in {value.name for value in inputs()}


def _run_bound(session: ort.InferenceSession, feed: dict[str, np.ndarray]):
    """Run with IO binding: inputs are read in place and the outputs stay in the OrtValues
    ONNX Runtime allocated; ``numpy()`` views them without a copy (the view keeps the memory
    alive), so the grown KV cache is never copied on its way out of the session."""
    binding = session.io_binding()
    for name, value in feed.items():
        binding.bind_cpu_input(name, np.ascontiguousarray(value))
    for output in session.get_outputs()[:2]:
        binding.bind_output(output.name)
    session.run_with_iobinding(binding)
    logits, present = (value.numpy() for value in binding.get_outputs()[:2])
    return logits, present


class OrtStepModel(SessionStepModel):
    """The step model on in-process ONNX Runtime sessions of the two ONNX files."""

    def __init__(self, encoder: Path, decoder: Path, threads: int = 2) -> None:
        super().__init__(session(encoder, threads), session(decoder, threads))
        self.candidates = OrtCandidates(threads)  # each row's best tokens, in C++
