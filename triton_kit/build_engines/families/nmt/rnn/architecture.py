"""The recurrent architecture (GRU + attention): ``nmt_rnn``, ``nmt_rnn_encoder``,
``nmt_rnn_decoder`` and ``nmt_rnn_generate``.

Served by the same python BLS model and search as ``nmt``, with the Transformer checkpoint's
tokenizer, split and generation rules; trained on the Transformer's task and vocabulary. Its
ONNX step graphs keep the Transformer's tensor names and row axis (see
:mod:`~triton_kit.build_engines.families.nmt.rnn.model`). The step models are ONNX (ONNX Runtime,
or TensorRT plans through the shared engine hook), with no INT8 calibration source.

``--engine torch --search engine`` (fp32, or int8-dynamic on CPU) writes ``nmt_rnn_generate``
instead of the step models: the search module the Transformer's ``nmt_generate`` uses, over the
traced encoder and a step that gathers the recurrent state by ``beam_index``. The RNN has no
Hugging Face ``generate``; the module's reference is the Python search the served ``nmt_rnn``
runs with ``--search python`` (over the build's verified fp32 ONNX step graphs in ONNX Runtime).
Other ``--engine torch`` builds are refused (the torch engine has no recurrent step source).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from triton_kit.build_engines.families.nmt import corpus, repository
from triton_kit.build_engines.families.nmt.architecture import (
    ENCODER_AXES,
    ModelNames,
    Parity,
    SearchReference,
    StepGraph,
    Verification,
    encoder_graph,
)
from triton_kit.build_engines.families.nmt.corpus import Split
from triton_kit.build_engines.families.nmt.defaults import DEFAULTS
from triton_kit.build_engines.families.nmt.rnn import model as rnn_model
from triton_kit.build_engines.families.nmt.rnn.model import RnnConfig, RnnTranslator
from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import PRECISION as INT8_DYNAMIC
from triton_kit.build_engines.families.nmt.vocab import encode, pad_batch
from triton_kit.build_engines.repository import ModelConfig, onnx_model_config, set_parameters
from triton_kit.build_engines.repository import Tensor as TensorSpec
from triton_kit.build_engines.steps import BuildError
from triton_kit.python_models.nmt.decode import DecodeSettings
from triton_kit.python_models.nmt.settings import Limits

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import SearchBuild
    from triton_kit.build_engines.families.nmt.torchscript.row_step import RowStep
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.python_models.nmt.decode import StepModel

TOKENIZER_CHECKPOINT = corpus.DEFAULT_CHECKPOINT  # vocabularies, split and generation rules
MAX_LENGTH = 64  # default, as in the Transformer's generation config
MAX_POSITIONS = 128  # request limits as the Transformer's (same errors for the same input)

# The ONNX inputs' axis names: the export's, and the dry run's before any export (the
# encoder's inputs are the Transformer's).
DECODER_AXES = {
    "input_ids": {0: "rows"},
    "encoder_attention_mask": {0: "rows", 1: "src_len"},
    "cross_kv": {2: "rows", 3: "src_len"},
    "past_kv": {2: "rows"},
}


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


class ReorderingStep(nn.Module):
    """``(input_ids, encoder_attention_mask, cross_kv, past_kv, beam_index) -> (logits,
    present_kv)``: the ONNX step graph's computation on the state rows ``beam_index`` picks
    (a beam's parent; a finished sentence's rows are not picked), as the Transformer's step
    gathers its KV cache. The search's first state is zeros (the settings' template)."""

    def __init__(self, model: RnnTranslator) -> None:
        super().__init__()
        self.step = DecoderStepGraph(model)

    def forward(
        self, input_ids: Tensor, mask: Tensor, cross: Tensor, past: Tensor, beam_index: Tensor
    ) -> tuple[Tensor, Tensor]:
        return self.step(input_ids, mask, cross, past.index_select(2, beam_index))


class Rnn:
    """The GRU encoder-decoder, as
    :class:`~triton_kit.build_engines.families.nmt.architecture.Architecture`."""

    name = "rnn"
    default = DEFAULTS[name]  # what --engine/--search left out build, and why
    names = ModelNames("nmt_rnn", "nmt_rnn_encoder", "nmt_rnn_decoder", "nmt_rnn_generate")
    default_checkpoint = corpus.DEFAULT_RNN_CHECKPOINT
    encoder_axes = ENCODER_AXES
    decoder_axes = DECODER_AXES
    # fp16 is refused: the one reference is the fp32 Python search, and CPU half is slow.
    torch_precisions = ("fp32", INT8_DYNAMIC)

    def tokenizer_checkpoint(self, checkpoint: Path) -> Path:
        return TOKENIZER_CHECKPOINT

    def load(self, checkpoint: Path) -> RnnTranslator:
        return rnn_model.load(checkpoint)

    def config_only(self, checkpoint: Path) -> SimpleNamespace:
        return SimpleNamespace(config=RnnConfig.load(checkpoint))

    def decode_settings(self, model) -> DecodeSettings:
        return decode_settings(model)

    def limits(self, model, max_beam_size: int) -> Limits:
        return limits(model, max_beam_size)

    def engine_search(self, options: BuildOptions, search: str) -> bool:
        """The TorchScript search (``nmt_rnn_generate``) with ``--engine torch``, and only it."""
        from triton_kit.build_engines.engines.registry import Engine

        if options.engine is Engine.CTRANSLATE2:
            raise BuildError(
                "--engine ctranslate2 converts Marian (Transformer) checkpoints; CTranslate2 "
                "has no converter for this recurrent model"
            )
        torch_engine = options.engine is Engine.TORCH
        if search == "engine" and not torch_engine:
            raise BuildError(
                "--architecture rnn --search engine is the TorchScript search: add --engine torch "
                "(ONNX Runtime's BeamSearch operator runs Transformer decoders only)"
            )
        if torch_engine and search != "engine":
            raise BuildError(
                "--architecture rnn --engine torch builds the whole search as TorchScript only: "
                "add --search engine (the step models are ONNX: --engine onnxruntime or tensorrt)"
            )
        return torch_engine

    def writes_step_models(self, options: BuildOptions, generate: bool) -> bool:
        return not generate

    def encoder_graph(self, model: RnnTranslator) -> StepGraph:
        ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, 139, 139]], dtype=torch.long)
        mask = (ids != 139).long()
        cross_kv_axes = {2: "batch", 3: "src_len"}
        pinned = {"last_hidden_state": {2: model.config.hidden}}
        return encoder_graph(EncoderGraph(model), (ids, mask), cross_kv_axes, pinned)

    def decoder_graph(self, model: RnnTranslator) -> StepGraph:
        rows, src_len, hidden = 3, 5, model.config.hidden
        ids = torch.full((rows, 1), 5, dtype=torch.long)
        mask = torch.ones(rows, src_len, dtype=torch.long)
        cross = torch.randn(1, 2, rows, src_len, hidden)
        past = torch.randn(state_shape(model, rows))
        return StepGraph(
            DecoderStepGraph(model),
            (ids, mask, cross, past),
            ["input_ids", "encoder_attention_mask", "cross_kv", "past_kv"],
            ["logits", "present_kv"],
            DECODER_AXES,
            {"logits": {0: "rows"}, "present_kv": {2: "rows"}},
        )

    def verification(self, checkpoint: Path, count: int) -> Verification:
        return Verification(*verification_ids(count))

    def compare(
        self,
        model: RnnTranslator,
        checkpoint: Path,
        onnx: tuple[Path, Path],
        sentences: Verification,
        threads: int,
    ) -> Parity:
        return compare(model, *onnx, list(sentences.sources), list(sentences.targets))

    def encoder_config(self, model, settings, bounds, options: BuildOptions) -> ModelConfig:
        inputs = [("input_ids", (-1, -1)), ("attention_mask", (-1, -1))]
        outputs = [
            ("last_hidden_state", (-1, -1, model.config.hidden)),
            ("cross_kv", _cross(model.config)),
        ]
        return _step_config(self.names.encoder, inputs, outputs, bounds, options)

    def decoder_config(self, model, settings, bounds, options: BuildOptions) -> ModelConfig:
        inputs = [
            ("input_ids", (-1, 1)),
            ("encoder_attention_mask", (-1, -1)),
            ("cross_kv", _cross(model.config)),
            ("past_kv", _state(model.config)),
        ]
        outputs = [
            ("logits", (-1, model.config.vocab_size)),
            ("present_kv", _state(model.config)),
        ]
        return _step_config(self.names.decoder, inputs, outputs, bounds, options)

    def calibration_sources(self, checkpoint: Path, onnx: tuple[Path, Path], settings, bounds):
        return {}  # no INT8 calibration source

    def torch_sources(self, model: nn.Module):
        return {}  # --engine torch builds the whole search only (engine_search)

    def write_search_graph(self, out: Path, model, settings, options: BuildOptions) -> None:
        raise BuildError("--architecture rnn: no ONNX search graph (engine_search refuses it)")

    def search_steps(
        self, model: RnnTranslator, settings: DecodeSettings, device, dtype, int8_dynamic: bool
    ) -> tuple[torch.jit.ScriptModule, RowStep]:
        """The traced steps (:meth:`traced_steps`), the decoder driven as a
        :class:`~triton_kit.build_engines.families.nmt.torchscript.row_step.RowStep`."""
        from triton_kit.build_engines.families.nmt.torchscript.row_step import RowStep

        encoder, decoder = self.traced_steps(model, device, dtype, int8_dynamic)
        return encoder, RowStep(decoder, settings)

    def traced_steps(
        self, model: RnnTranslator, device, dtype, int8_dynamic: bool
    ) -> tuple[torch.jit.ScriptModule, torch.jit.ScriptModule]:
        """The encoder and the reordering step, traced on ``device`` on feeds whose shapes the
        search never keeps (a padded row; a past with one row more than the step, reordered);
        with ``int8_dynamic`` the ``nn.Linear`` and ``nn.GRU`` layers dynamically quantised
        (CPU only). fp32 only: ``dtype`` is not used."""
        if int8_dynamic:
            from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import quantize

            model = quantize(model, [nn.Linear, nn.GRU])
        device = torch.device(device)
        config = model.config
        pad = config.pad_token_id
        ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, pad, pad]], device=device)
        rows, src_len = 3, 5
        step_feeds = (
            torch.full((rows, 1), 5, dtype=torch.long, device=device),
            torch.ones(rows, src_len, dtype=torch.long, device=device),
            torch.randn(1, 2, rows, src_len, config.hidden, device=device),
            torch.randn(config.layers, 1, rows + 1, config.hidden, device=device),
            torch.tensor([2, 0, 2], device=device),
        )
        encoder = EncoderGraph(model).eval().to(device)
        decoder = ReorderingStep(model).eval().to(device)
        with torch.no_grad():
            traced_encoder = torch.jit.trace(encoder, (ids, (ids != pad).long()))
            traced_decoder = torch.jit.trace(decoder, step_feeds)
        return traced_encoder, traced_decoder

    def search_reference(self, build: SearchBuild) -> SearchReference:
        from triton_kit.python_models.nmt.ort import OrtStepModel

        steps = OrtStepModel(*build.onnx, threads=build.threads or 1)
        sources = build.sentences.sources
        return python_search_reference(
            steps, build.settings, sources, build.max_length, build.beams
        )

    def training(self, steps: int | None) -> RnnTraining:
        return RnnTraining(steps=steps or RnnTraining.steps)


RNN = Rnn()


def decode_settings(model: RnnTranslator) -> DecodeSettings:
    """The Transformer's generation rules (never emit <pad>, forced eos, beam 4, penalty 1)."""
    config = model.config
    return DecodeSettings(
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        cache_shape=(config.layers, 1, config.hidden),
        suppressed_token_ids=(config.pad_token_id,),
        forced_eos=True,
        length_penalty=1.0,
        early_stopping=False,
        recurrent_state=True,
    )


def limits(model: RnnTranslator, max_beam_size: int) -> Limits:
    return Limits(
        default_beam_size=min(4, max_beam_size),
        max_beam_size=min(max_beam_size, (model.config.vocab_size - 1) // 2),
        default_max_length=MAX_LENGTH,
        max_target_length=MAX_POSITIONS,
        max_source_length=MAX_POSITIONS,
    )


def _step_config(name: str, inputs, outputs, bounds: Limits, options: BuildOptions) -> ModelConfig:
    """An ONNX step model's config: ids INT64 (the ``*_ids`` and ``*mask`` tensors), states FP32;
    max_batch_size 0 (the BLS model sends whole padded batches itself)."""

    def tensor(name: str, dims: tuple[int, ...]) -> TensorSpec:
        dtype = "INT64" if name.endswith(("_ids", "mask")) else "FP32"
        return TensorSpec(name, dtype, dims)

    config = onnx_model_config(
        name,
        inputs=[tensor(*spec) for spec in inputs],
        outputs=[tensor(*spec) for spec in outputs],
        max_batch_size=0,
        instances=options.instances,
        threads=options.threads,
    )
    set_parameters(config, repository.shape_parameters(bounds, options))
    return config


def _state(config) -> tuple[int, ...]:
    return (config.layers, 1, -1, config.hidden)


def _cross(config) -> tuple[int, ...]:
    return (1, 2, -1, -1, config.hidden)


def state_shape(model: RnnTranslator, rows: int) -> tuple[int, int, int, int]:
    return (model.config.layers, 1, rows, model.config.hidden)


def verification_ids(count: int) -> tuple[list[list[int]], list[list[int]]]:
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(str(TOKENIZER_CHECKPOINT))
    numbers = list(corpus.Split.load(TOKENIZER_CHECKPOINT / "split.json").test[:count])
    sources = encode(tokenizer, [corpus.english(n) for n in numbers], False)
    return sources, encode(tokenizer, [corpus.french(n) for n in numbers], True)


def compare(
    model: RnnTranslator,
    encoder_path: Path,
    decoder_path: Path,
    source_ids: list[list[int]],
    target_ids: list[list[int]],
) -> Parity:
    """Max abs diff of encoder outputs and of every teacher-forced step's logits: the ONNX step
    graph token by token against one full PyTorch forward."""
    from triton_kit.python_models.nmt.ort import session

    pad = model.config.pad_token_id
    ids = pad_batch(source_ids, pad)
    mask = (ids != pad).long()
    targets = [r[:-1] for r in target_ids]
    decoder_in = pad_batch(targets, pad, prefix=model.config.decoder_start_token_id)
    length = decoder_in.shape[1]
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


def python_search_reference(
    steps: StepModel,
    settings: DecodeSettings,
    sources: Sequence[Sequence[int]],
    max_length: int,
    beams: Sequence[int],
) -> SearchReference:
    """The Python search over ``steps`` (the served ``nmt_rnn``'s) at each beam size."""
    from triton_kit.python_models.nmt.decode import Job, generate

    sources = [list(ids) for ids in sources]
    expected = {
        beam: generate(steps, [Job(ids, beam, max_length) for ids in sources], settings)
        for beam in beams
    }
    versus = "vs the Python search (ONNX Runtime)"
    return SearchReference(sources, expected, sources, versus, "the Python search")


@dataclass(frozen=True)
class RnnTraining:
    """Sized to train in a few minutes on one CPU thread; the Transformer's vocabularies and
    held-out split (assets/nmt-en-fr-numbers), seeded corpus, initialisation and batch order."""

    seed: int = 1234
    examples: int = 100_000
    steps: int = 2500
    batch_size: int = 64
    learning_rate: float = 3e-3
    label_smoothing: float = 0.0
    threads: int = 1
    eval_every: int = 500

    def corpus(self, output: Path):
        from transformers import MarianTokenizer

        tokenizer = MarianTokenizer.from_pretrained(str(TOKENIZER_CHECKPOINT))
        split = corpus.Split.load(TOKENIZER_CHECKPOINT / "split.json")
        return (
            tokenizer,
            split,
            corpus.pairs(corpus.training_numbers(split, self.examples, self.seed)),
        )

    def model(self, tokenizer):
        model = RnnTranslator(RnnConfig(vocab_size=len(tokenizer.encoder)))
        optimizer = torch.optim.Adam(model.parameters(), lr=self.learning_rate)
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, self.learning_rate, total_steps=self.steps, pct_start=0.05
        )
        return model, optimizer, schedule, torch.device("cpu")

    def before_step(self, optimizer, step: int) -> None:
        pass

    def logits(self, model, source, mask, decoder_input):
        return model(source, mask, decoder_input)

    def after_step(self, model) -> None:
        pass

    def valid_score(self, model, tokenizer, numbers: list[int]) -> float:
        return greedy_exact_match(model, tokenizer, numbers)

    def save(self, model, tokenizer, output: Path, split: Split) -> None:
        rnn_model.save(model, output)


def greedy_exact_match(model, tokenizer, numbers: list[int], max_length: int = 64) -> float:
    """Greedy decode in PyTorch (training-time check only; the quality bar is beam 4)."""
    config = model.config
    hits = 0
    with torch.no_grad():
        for start in range(0, len(numbers), 100):
            chunk = numbers[start : start + 100]
            ids = pad_batch(encode(tokenizer, [corpus.english(n) for n in chunk], False), 139)
            mask = (ids != config.pad_token_id).long()
            _, cross = model.encode(ids, mask)
            state = model.initial_state(len(chunk))
            token = torch.full((len(chunk), 1), config.decoder_start_token_id)
            out = []
            for _ in range(max_length):
                logits, state = model.decode(token, mask, cross, state)
                logits[:, -1, config.pad_token_id] = -1e9
                token = logits[:, -1].argmax(-1, keepdim=True)
                out.append(token)
            rows = torch.cat(out, dim=1).tolist()
            for row, number in zip(rows, chunk, strict=True):
                row = row[: row.index(config.eos_token_id)] if config.eos_token_id in row else row
                hits += tokenizer.decode(row, skip_special_tokens=True) == corpus.french(number)
    return hits / len(numbers)
