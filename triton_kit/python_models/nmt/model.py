"""The ``nmt`` BLS model: text in, translation out, the decode loop inside Triton.

Per execute call: tokenise every request (sentencepiece), encode them all at once,
then run one beam search batched across the requests (each may ask its own
``BEAM_SIZE`` and ``MAX_LENGTH``), and detokenise. The encoder and decoder are
the ONNX files of the sibling models ``nmt_encoder`` and ``nmt_decoder``, run
in-process (no Triton round trip per decoder step); where those models serve no
ONNX file (TensorRT plans on a GPU host), the steps go to them through BLS. Built with
``--search engine``, the whole search is the sibling ``generate_model`` instead, served by
Triton's own backend and called through BLS (triton_kit/python_models/nmt/generate.py): ONNX
Runtime's BeamSearch graph (onnxruntime backend) once per batch, or the TorchScript search
(pytorch backend) once per beam size of the batch. The stub then imports no engine library
(neither onnxruntime nor torch).

Each request's response goes out through its response sender the moment its
sentences are finished, so a short greedy request does not wait for a long beam
search in the same batch; a batch the engine's search answers in one call (one beam
size; any beam sizes for CTranslate2, whose one call takes each row's) returns its
responses from ``execute`` instead, one message to Triton where each send is a round trip.
The model stays non-decoupled (one response per request), so HTTP and gRPC both work.

Inputs (a request may hold several rows):
- ``TEXT``: UTF-8; empty or non-UTF-8 text is INVALID_ARG. Sources longer than
  the model's positional table are truncated to ``max_source_length`` tokens
  (``</s>`` included), as ``MarianTokenizer(truncation=True)`` would.
- ``BEAM_SIZE`` (optional, default 4): 1 is greedy; 1..``max_beam_size``.
- ``MAX_LENGTH`` (optional): Hugging Face ``max_length`` semantics (the decoder
  start token counts); 2..``max_target_length``.

The sum over rows of BEAM_SIZE x MAX_LENGTH is bounded by ``max_beam_tokens``
(default 16384), so one request cannot hold the instance for seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.python_models.common import bls
from triton_kit.python_models.common.base import (
    Arrays,
    InvalidInput,
    PythonModel,
    array_response,
    error_response,
)
from triton_kit.python_models.common.contracts import BEAM_INDEX, decoder_feed
from triton_kit.python_models.common.sibling import sibling_device, sibling_file
from triton_kit.python_models.nmt.decode import Job, StepModel, generate
from triton_kit.python_models.nmt.settings import Limits, from_parameters
from triton_kit.python_models.nmt.text import MarianText
from triton_kit.python_models.nmt.timing import TimedStepModel

try:  # Present only inside Triton's python stub.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover
    pb_utils = None


class BlsStepModel:
    """``encode``/``step`` as BLS calls to the encoder and decoder models (one Triton round
    trip per decoder step: the fallback when those models serve no ONNX file).
    ``reorders``: the decoder takes ``beam_index`` (its config lists it)."""

    def __init__(self, encoder: str, decoder: str, reorders: bool = False) -> None:
        self.encoder, self.decoder, self.reorders = encoder, decoder, reorders

    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        return bls.infer(self.encoder, feed, ["cross_kv"])[0]

    def step(
        self, input_ids, attention_mask, cross_kv, past_kv, beam_index=None
    ) -> tuple[np.ndarray, np.ndarray]:
        feed = decoder_feed(input_ids, attention_mask, cross_kv, past_kv, beam_index)
        logits, present = bls.infer(self.decoder, feed, ["logits", "present_kv"])
        return logits, present


def _config_lists(version_dir: Path, model: str, tensor: str) -> bool:
    """Whether the sibling ``model``'s config.pbtxt names ``tensor`` (an input or output)."""
    config = Path(version_dir).parent.parent / model / "config.pbtxt"
    return config.is_file() and f'"{tensor}"' in config.read_text()


def step_model(version_dir: Path, encoder: str, decoder: str, threads: int) -> StepModel:
    """The sibling models' files run in-process, else BLS calls to those models.

    In-process saves a Triton round trip per decoder step: ONNX files through ONNX
    Runtime sessions, each row's best tokens too (:class:`OrtStepModel`, as the in-process
    benchmark runs it: with numpy's the served beam-4 search was ~20 ms a sentence
    slower on the large model), TorchScript (``--engine torch``) through torch on the
    device the encoder's instance group names, the KV cache kept there between steps. Another
    engine (a TensorRT plan on a GPU host) plugs in as another :class:`StepModel`.
    """
    names = (encoder, decoder)
    scripts = [sibling_file(version_dir, name, "model.pt") for name in names]
    if None not in scripts:
        from triton_kit.python_models.nmt.torch_steps import load_step_model

        device = sibling_device(version_dir, encoder)
        return load_step_model(scripts[0], scripts[1], device, threads)
    paths = [sibling_file(version_dir, name) for name in names]
    if None in paths:
        return BlsStepModel(encoder, decoder, _config_lists(version_dir, decoder, BEAM_INDEX))
    from triton_kit.python_models.nmt.ort import OrtStepModel  # the stub's only engine import

    return OrtStepModel(*paths, threads=threads)


def parse_rows(inputs: Arrays, text: MarianText, limits: Limits) -> list[Job]:
    """One :class:`Job` per row of the request; any bad row fails the request."""
    texts = inputs["TEXT"].reshape(-1)
    beams = _per_row(inputs.get("BEAM_SIZE"), len(texts), limits.default_beam_size)
    lengths = _per_row(inputs.get("MAX_LENGTH"), len(texts), limits.default_max_length)
    jobs = []
    for raw, beam, length in zip(texts, beams, lengths, strict=True):
        if not 1 <= beam <= limits.max_beam_size:
            raise InvalidInput(f"BEAM_SIZE must be in 1..{limits.max_beam_size}, got {beam}")
        if not 2 <= length <= limits.max_target_length:
            raise InvalidInput(
                f"MAX_LENGTH must be in 2..{limits.max_target_length} "
                f"(it counts the decoder start token), got {length}"
            )
        size = len(raw) if isinstance(raw, bytes) else len(str(raw).encode("utf-8"))
        if size > limits.max_text_bytes:
            raise InvalidInput(f"TEXT is {size} bytes; the limit is {limits.max_text_bytes} bytes")
        jobs.append(Job(text.encode(_decode_text(raw)), int(beam), int(length)))
    work = sum(beam * length for beam, length in zip(beams, lengths, strict=True))
    if work > limits.max_beam_tokens:
        raise InvalidInput(
            f"rows x BEAM_SIZE x MAX_LENGTH is {work}; the limit is {limits.max_beam_tokens} "
            "per request: split the request or lower BEAM_SIZE/MAX_LENGTH"
        )
    return jobs


def _per_row(values: np.ndarray | None, rows: int, default: int) -> list[int]:
    if values is None:
        return [default] * rows
    flat = values.reshape(-1)
    if flat.size == 1:
        return [int(flat[0])] * rows
    if flat.size != rows:
        raise InvalidInput(f"expected {rows} values, one per TEXT row, got {flat.size}")
    return [int(v) for v in flat]


def _decode_text(raw: Any) -> str:
    data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
    try:
        value = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"TEXT is not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    if not value.strip():
        raise InvalidInput("TEXT is empty")
    return value


@dataclass
class _Pending:
    """A request whose rows are being decoded; answered once every row is done."""

    sender: Any
    rows: list[int]
    texts: dict[int, str]
    sent: bool = False


class NmtModel(PythonModel):
    def setup(self) -> None:
        self.settings, self.limits = from_parameters(self.params)
        self.text = MarianText(self.version_dir, self.limits.max_source_length)
        self.engine_search = None  # the search inside the engine, where the build wrote one
        self.any_beams_one_call = False  # whether one engine call takes every beam size
        generate_model = self.params.str("generate_model", "")
        if generate_model:  # then the step models are not loaded: one search per engine
            from triton_kit.python_models.nmt.generate import served_search, serves_ct2

            self.engine_search = served_search(self.version_dir, generate_model, self.settings)
            self.any_beams_one_call = serves_ct2(self.version_dir, generate_model)
            return
        self.runner = step_model(
            self.version_dir,
            self.params.str("encoder_model", "nmt_encoder"),
            self.params.str("decoder_model", "nmt_decoder"),
            self.params.int("intra_op_thread_count", 1),
        )
        if self.profile is not None:  # TRITON_KIT_PROFILE_DIR: the search's phases too
            self.runner = TimedStepModel(self.runner, self.profile.add)

    def _search(self, jobs: list[Job], on_done) -> None:
        if self.engine_search is None:
            generate(self.runner, jobs, self.settings, on_done=on_done)
            return
        self.engine_search(jobs, on_done)

    def _execute(self, requests: list[Any]) -> list[Any] | None:
        """Answers each request as its sentences finish, while the search goes on.

        Its client's next request then arrives while this call still runs: the config must
        let Triton prefetch it (no queue policy,
        triton_kit/build_engines/families/nmt/repository.py), or the dynamic batcher waits 500 ms
        before scheduling it. Where every sentence ends at the same moment (the engine's search,
        one call for the batch's one beam size, or CTranslate2's for any), the responses go
        back together as execute's
        return, one message to Triton instead of a round trip per request.
        """
        start = time.perf_counter()
        parsed = [self._parse(request) for request in requests]
        start = self.timed("parse", start)
        if self._one_engine_call(parsed):
            return self._answer_together(parsed, start)
        jobs: list[Job] = []
        pending: list[_Pending] = []
        owner: list[_Pending] = []
        for request, rows in zip(requests, parsed, strict=True):
            sender = request.get_response_sender()
            if isinstance(rows, Exception):
                _send(sender, error_response(rows))
                continue
            entry = _Pending(sender, list(range(len(jobs), len(jobs) + len(rows))), {})
            pending.append(entry)
            owner.extend([entry] * len(rows))
            jobs.extend(rows)

        def finished(index: int, ids: list[int]) -> None:
            entry = owner[index]
            entry.texts[index] = self.text.decode(ids)
            if len(entry.texts) == len(entry.rows):
                self._answer(entry)

        try:
            self._search(jobs, finished)
            self.timed("search", start)
        except Exception as exc:
            failure = error_response(self._note(exc))
            for entry in pending:
                if not entry.sent:
                    entry.sent = True
                    _send(entry.sender, failure)
        return None

    def _parse(self, request: Any) -> list[Job] | Exception:
        """The request's rows as jobs, or why it is refused (it then fails alone)."""
        try:
            return parse_rows(self.read_inputs(request), self.text, self.limits)
        except Exception as exc:
            return self._note(exc)

    def _one_engine_call(self, parsed: list[list[Job] | Exception]) -> bool:
        """Whether the engine's search answers the whole batch in one call: always for the
        ctranslate2 backend (a call takes each row's beam size), else with one beam size."""
        if self.engine_search is None:
            return False
        if self.any_beams_one_call:
            return True
        beams = {job.beam_size for rows in parsed if isinstance(rows, list) for job in rows}
        return len(beams) <= 1

    def _answer_together(self, parsed: list[list[Job] | Exception], start: float) -> list[Any]:
        """Every request's response, for execute to return, after one engine call."""
        jobs = [job for rows in parsed if isinstance(rows, list) for job in rows]
        try:
            ids = self.engine_search(jobs, None) if jobs else []
        except Exception as exc:
            self._note(exc)
            return [error_response(exc if isinstance(rows, list) else rows) for rows in parsed]
        start = self.timed("search", start)
        responses = []
        for rows in parsed:
            if isinstance(rows, Exception):
                responses.append(error_response(rows))
                continue
            texts = [[self.text.decode(row)] for row in ids[: len(rows)]]
            ids = ids[len(rows) :]
            translation = np.array(texts, dtype=np.object_)
            responses.append(array_response({"TRANSLATION": translation}, self.output_dtypes))
        self.timed("answer", start)
        return responses

    def _answer(self, entry: _Pending) -> None:
        start = time.perf_counter()
        texts = np.array([[entry.texts[row]] for row in entry.rows], dtype=np.object_)
        entry.sent = True
        _send(entry.sender, array_response({"TRANSLATION": texts}, self.output_dtypes))
        self.timed("answer", start)


def _send(sender: Any, response: Any) -> None:
    sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
