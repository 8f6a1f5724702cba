"""The Transformer (Marian) architecture: ``nmt``, ``nmt_encoder``, ``nmt_decoder`` and
``nmt_generate``.

Any local Marian checkpoint directory (``source.spm``, ``target.spm``, ``vocab.json``); the
default is the committed English→French number model, which ``--train`` rebuilds from scratch
(seeded: the split, the corpus, sentencepiece, initialisation and batch order). Its step graphs
are :mod:`~triton_kit.build_engines.families.nmt.export`'s, its decode rules the checkpoint's
generation config, and its TorchScript search is checked against Hugging Face ``generate``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
from torch import nn

from triton_kit.build_engines.families.nmt import corpus, repository
from triton_kit.build_engines.families.nmt.architecture import (
    ENCODER_AXES,
    ModelNames,
    SearchReference,
    StepGraph,
    Verification,
    encoder_graph,
)
from triton_kit.build_engines.families.nmt.corpus import Split
from triton_kit.build_engines.families.nmt.defaults import DEFAULTS
from triton_kit.build_engines.families.nmt.export import (
    DECODER_AXES,
    DecoderStepGraph,
    EncoderGraph,
    cache_shape,
    load_model,
)
from triton_kit.build_engines.families.nmt.torchscript.int8_dynamic import PRECISION as INT8_DYNAMIC
from triton_kit.build_engines.families.nmt.vocab import write_tokenizer
from triton_kit.build_engines.steps import BuildError, info
from triton_kit.python_models.common.contracts import NMT_DECODER_INPUTS, NMT_DECODER_OUTPUTS
from triton_kit.python_models.nmt.decode import DecodeSettings
from triton_kit.python_models.nmt.settings import Limits

if TYPE_CHECKING:
    from triton_kit.build_engines.families.nmt.architecture import Parity, SearchBuild
    from triton_kit.build_engines.options import BuildOptions

DEFAULT_CHECKPOINT = corpus.DEFAULT_CHECKPOINT


class Transformer:
    """Marian, as :class:`~triton_kit.build_engines.families.nmt.architecture.Architecture`."""

    name = "transformer"
    default = DEFAULTS[name]  # what --engine/--search left out build, and why
    names = ModelNames(repository.BLS, repository.ENCODER, repository.DECODER, repository.GENERATE)
    default_checkpoint = DEFAULT_CHECKPOINT
    encoder_axes = ENCODER_AXES
    decoder_axes = DECODER_AXES
    torch_precisions = ("fp32", "fp16", INT8_DYNAMIC)  # int8-dynamic: qint8 linear weights

    def tokenizer_checkpoint(self, checkpoint: Path) -> Path:
        return checkpoint

    def load(self, checkpoint: Path) -> nn.Module:
        return load_model(checkpoint)

    def config_only(self, checkpoint: Path) -> SimpleNamespace:
        return config_only(checkpoint)

    def decode_settings(self, model) -> DecodeSettings:
        return decode_settings(model)

    def limits(self, model, max_beam_size: int) -> Limits:
        return limits(model, max_beam_size)

    def engine_search(self, options: BuildOptions, search: str) -> bool:
        """ONNX Runtime's BeamSearch operator, on the graphs it can take (fp32, or int8-dynamic
        subgraphs), or the TorchScript search of ``--engine torch`` (fp32, fp16, int8-dynamic
        on CPU). Refuses ``--engine torch`` int8-dynamic step models (there are none)."""
        from triton_kit.build_engines.engines.registry import Engine

        if options.engine is Engine.CTRANSLATE2:  # always the whole model: nmt_ct2
            if search != "engine":
                raise BuildError(
                    "--engine ctranslate2 is the whole search in CTranslate2 (nmt_ct2): it has "
                    "no step models for --search python (--engine onnxruntime --search python "
                    "builds the Python search)"
                )
            from triton_kit.build_engines.families.nmt.ct2_engine import check_precision

            check_precision(options.precision)  # before the export, not after it
            return True
        torch_int8 = options.engine is Engine.TORCH and options.precision == INT8_DYNAMIC
        if search != "engine":
            if torch_int8:
                raise BuildError(
                    "--engine torch --precision int8-dynamic builds the search inside the engine "
                    "only (the TorchScript step models are fp32/fp16): add --search engine"
                )
            return False
        if options.engine is Engine.TORCH:
            return options.precision in self.torch_precisions
        return options.engine is Engine.ONNXRUNTIME and options.precision in ("fp32", INT8_DYNAMIC)

    def writes_step_models(self, options: BuildOptions, generate: bool) -> bool:
        """All but ``--engine torch`` int8-dynamic, which has no int8 step models, and
        ``--engine ctranslate2``, whose model is the whole translator."""
        from triton_kit.build_engines.engines.registry import Engine

        if options.engine is Engine.CTRANSLATE2:
            return False
        return not (options.engine is Engine.TORCH and options.precision == INT8_DYNAMIC)

    def encoder_graph(self, model: nn.Module) -> StepGraph:
        ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, 0, 0]], dtype=torch.long)
        mask = (ids != 0).long()
        mask[:, 0] = 1
        return encoder_graph(EncoderGraph(model), (ids, mask), {2: "batch", 4: "src_len"})

    def decoder_graph(self, model: nn.Module) -> StepGraph:
        rows, src_len, past_len = 3, 5, 4
        ids = torch.full((rows, 1), 5, dtype=torch.long)
        mask = torch.ones(rows, src_len, dtype=torch.long)
        cross = torch.randn(cache_shape(model, rows, src_len))
        past = torch.randn(cache_shape(model, rows + 1, past_len))  # past rows differ from rows
        beam_index = torch.tensor([2, 0, 3])
        return StepGraph(
            DecoderStepGraph(model),
            (ids, mask, cross, past, beam_index),
            list(NMT_DECODER_INPUTS),
            list(NMT_DECODER_OUTPUTS),
            DECODER_AXES,
            {"logits": {0: "rows"}, "present_kv": {2: "rows", 4: "present_len"}},
        )

    def verification(self, checkpoint: Path, count: int) -> Verification:
        references = (checkpoint / "split.json").exists()  # else sources as targets
        return Verification(*verification_texts(checkpoint, count), references=references)

    def compare(self, model, checkpoint: Path, onnx, sentences, threads: int) -> Parity:
        from transformers import MarianTokenizer

        from triton_kit.build_engines.families.nmt.verify import compare

        tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
        return compare(model, tokenizer, *onnx, sentences.sources, sentences.targets, threads)

    def encoder_config(self, model, settings, bounds, options: BuildOptions):
        return repository.encoder_config(settings, model.config.d_model, bounds, options)

    def decoder_config(self, model, settings, bounds, options: BuildOptions):
        return repository.decoder_config(settings, vocab_size(model), bounds, options)

    def calibration_sources(self, checkpoint: Path, onnx: tuple[Path, Path], settings, bounds):
        from triton_kit.build_engines.families.nmt.calibration import calibration_sources

        return calibration_sources(checkpoint, *onnx, settings, bounds.max_source_length)

    def torch_sources(self, model: nn.Module):
        from triton_kit.build_engines.families.nmt.torchscript.steps import sources

        return sources(model)

    def write_search_graph(self, out: Path, model, settings, options: BuildOptions) -> None:
        """``nmt_generate`` as ONNX Runtime's BeamSearch operator over the step subgraphs."""
        from triton_kit.build_engines.families.nmt.generation_graph import (
            SearchTokens,
            export_generation,
        )
        from triton_kit.build_engines.repository import write_model

        work = options.work_dir / "nmt" / "generate"
        path = export_generation(
            model,
            SearchTokens.of(settings, vocab_size(model)),
            work / "model.onnx",
            work,
            int8_dynamic=options.precision == INT8_DYNAMIC,
        )
        write_model(out, repository.generate_config(options), {"model.onnx": path})
        info(f"wrote {out}/{repository.GENERATE} ({path.stat().st_size / 1e6:.1f} MB)")

    def search_steps(self, model: nn.Module, settings, device, dtype, int8_dynamic: bool):
        from triton_kit.build_engines.families.nmt.torchscript.steps import search_steps

        return search_steps(model, device, dtype, int8_dynamic)

    def search_reference(self, build: SearchBuild) -> SearchReference:
        return hf_reference(
            build.checkpoint, build.sentences.sources, build.max_length, build.beams
        )

    def training(self, steps: int | None) -> MarianTraining:
        return MarianTraining() if steps is None else MarianTraining(steps=steps)


TRANSFORMER = Transformer()


def vocab_size(model) -> int:
    return model.config.decoder_vocab_size or model.config.vocab_size


def decode_settings(model) -> DecodeSettings:
    """Token ids and scoring from the checkpoint, as Hugging Face ``generate`` would use them."""
    config, generation = model.config, model.generation_config
    bad_words = generation.bad_words_ids or []
    heads = config.decoder_attention_heads
    return DecodeSettings(
        decoder_start_token_id=int(
            generation.decoder_start_token_id or config.decoder_start_token_id
        ),
        eos_token_id=int(_first(generation.eos_token_id, config.eos_token_id)),
        pad_token_id=int(_first(generation.pad_token_id, config.pad_token_id)),
        cache_shape=(config.decoder_layers, heads, config.d_model // heads),
        suppressed_token_ids=tuple(int(w[0]) for w in bad_words if len(w) == 1),
        forced_eos=generation.forced_eos_token_id is not None,
        length_penalty=_first(generation.length_penalty, 1.0),
        early_stopping=_first(generation.early_stopping, False),
    )


def _first(value, fallback):
    if isinstance(value, (list, tuple)):
        return value[0]
    return fallback if value is None else value


def limits(model, max_beam_size: int) -> Limits:
    """The search keeps 2 x beam candidates from one row at the first step: cap the beam."""
    positions = model.config.max_position_embeddings
    return Limits(
        default_beam_size=min(4, max_beam_size),
        max_beam_size=min(max_beam_size, (vocab_size(model) - 1) // 2),
        default_max_length=min(int(model.generation_config.max_length or positions), positions),
        max_target_length=positions,
        max_source_length=positions,
    )


def config_only(checkpoint: Path) -> SimpleNamespace:
    """What :func:`decode_settings` and :func:`limits` read, without loading the weights."""
    from transformers import GenerationConfig, MarianConfig

    config = MarianConfig.from_pretrained(str(checkpoint))
    try:
        generation = GenerationConfig.from_pretrained(str(checkpoint))
    except OSError:  # no generation_config.json: what from_pretrained derives for the model
        generation = GenerationConfig.from_model_config(config)
    return SimpleNamespace(config=config, generation_config=generation)


def verification_texts(checkpoint: Path, count: int) -> tuple[list[str], list[str]]:
    """Held-out pairs for the default model; for other checkpoints, a few plain sentences."""
    split_file = checkpoint / "split.json"
    if split_file.exists():
        numbers = list(corpus.Split.load(split_file).test[:count])
        return [corpus.english(n) for n in numbers], [corpus.french(n) for n in numbers]
    sources = [corpus.english(n) for n in range(1, 1000, max(1, 1000 // count))][:count]
    return sources, sources


def hf_ids(model, tokenizer, texts: Sequence[str], beam: int, max_length: int) -> list[list[int]]:
    """HF ``generate`` ids, start token and trailing padding off (the checkpoint's settings)."""
    batch = tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True)
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(
            **batch.to(device), num_beams=beam, max_length=max_length, do_sample=False
        )
    pad = model.generation_config.pad_token_id
    rows = []
    for row in out.tolist():
        row = row[1:]
        while row and row[-1] == pad:
            row.pop()
        rows.append(row)
    return rows


def hf_reference(
    checkpoint: Path, texts: Sequence[str], max_length: int, beams: Sequence[int]
) -> SearchReference:
    """HF ``generate`` (fp32) on the verify sentences at each beam size."""
    return _hf_reference(Path(checkpoint), tuple(texts), max_length, tuple(beams))


@functools.lru_cache(maxsize=4)
def _hf_reference(
    checkpoint: Path, texts: tuple[str, ...], max_length: int, beams: tuple[int, ...]
) -> SearchReference:
    """Computed once for every module a build checks (an fp16 build checks two)."""
    from transformers import MarianTokenizer

    reference = load_model(checkpoint)
    tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
    sources = [tokenizer(t, truncation=True)["input_ids"] for t in texts]
    expected = {b: hf_ids(reference, tokenizer, texts, b, max_length) for b in beams}
    return SearchReference(sources, expected, texts, "vs HF generate", "HF generate")


@dataclass(frozen=True)
class MarianTraining:
    """Sized to finish in minutes on 2 CPU cores and stay far below 20 MB on disk."""

    seed: int = 1234
    examples: int = 200_000
    steps: int = 8000
    batch_size: int = 256
    learning_rate: float = 1.5e-3
    warmup_steps: int = 400
    label_smoothing: float = 0.05
    vocab_size: int = 80
    d_model: int = 128
    layers: int = 3
    heads: int = 4
    ffn_dim: int = 512
    max_positions: int = 128
    threads: int = 2
    eval_every: int = 1000

    def corpus(self, output: Path):
        """A fresh split and sentencepiece vocabularies, written into ``output``."""
        from transformers import MarianTokenizer

        output.mkdir(parents=True, exist_ok=True)
        split = corpus.make_split()
        split.save(output / "split.json")
        print(
            f"corpus: {self.examples} training pairs (held out: {len(split.test)} test, "
            f"{len(split.valid)} valid)",
            flush=True,
        )
        pairs = corpus.pairs(corpus.training_numbers(split, self.examples, self.seed))
        sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
        write_tokenizer(output, sources, targets, self.vocab_size, self.max_positions)
        return MarianTokenizer.from_pretrained(str(output)), split, pairs

    def model(self, tokenizer):
        from transformers import MarianMTModel

        config = marian_config(len(tokenizer.encoder), self)
        model = MarianMTModel(config)
        zero_pad_embedding(model, config.pad_token_id)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        print(f"training on {device}", flush=True)
        model.to(device)
        model.generation_config = generation_config(config, 64)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=self.learning_rate, betas=(0.9, 0.98), weight_decay=0.01
        )
        return model, optimizer, None, device  # the rate is set before each step

    def before_step(self, optimizer, step: int) -> None:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, self)

    def logits(self, model, source, mask, decoder_input):
        return model(input_ids=source, attention_mask=mask, decoder_input_ids=decoder_input).logits

    def after_step(self, model) -> None:
        zero_pad_embedding(model, model.config.pad_token_id)

    def valid_score(self, model, tokenizer, numbers: list[int]) -> float:
        return exact_match(model, tokenizer, numbers, num_beams=1)

    def save(self, model, tokenizer, output: Path, split: Split) -> None:
        model.to("cpu")
        model.save_pretrained(str(output))
        tokenizer.save_pretrained(str(output))
        test = exact_match(model, tokenizer, list(split.test), num_beams=4)
        print(f"test exact match (beam 4, {len(split.test)} held out): {test:.4f}", flush=True)


def marian_config(vocab_size: int, settings: MarianTraining):
    from transformers import MarianConfig

    pad = vocab_size - 1
    return MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=settings.d_model,
        encoder_layers=settings.layers,
        decoder_layers=settings.layers,
        encoder_attention_heads=settings.heads,
        decoder_attention_heads=settings.heads,
        encoder_ffn_dim=settings.ffn_dim,
        decoder_ffn_dim=settings.ffn_dim,
        max_position_embeddings=settings.max_positions,
        scale_embedding=True,
        dropout=0.1,
        attention_dropout=0.0,
        activation_function="swish",
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )


def generation_config(config, max_length: int):
    """What Opus-MT checkpoints ship: never emit <pad>, beam 4, eos forced at the limit."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bad_words_ids=[[config.pad_token_id]],
        decoder_start_token_id=config.decoder_start_token_id,
        eos_token_id=config.eos_token_id,
        forced_eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        max_length=max_length,
        num_beams=4,
    )


def zero_pad_embedding(model, pad: int) -> None:
    """Keep ``<pad>`` (the decoder start) a zero vector, as in Opus-MT checkpoints.

    CTranslate2 and Marian start decoding from a zero embedding rather than the
    ``<pad>`` row, so a checkpoint whose row is not zero runs as a different model there.
    """
    with torch.no_grad():
        model.get_input_embeddings().weight[pad].zero_()


def learning_rate(step: int, settings: MarianTraining) -> float:
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.learning_rate * 0.5 * (1 + math.cos(math.pi * progress))


def exact_match(model, tokenizer, numbers: list[int], num_beams: int) -> float:
    """HF ``generate`` (``model`` in eval mode) against the French of each number."""
    hits = 0
    for start in range(0, len(numbers), 100):
        chunk = numbers[start : start + 100]
        batch = tokenizer([corpus.english(n) for n in chunk], return_tensors="pt", padding=True)
        batch = batch.to(model.device)
        with torch.no_grad():
            out = model.generate(**batch, num_beams=num_beams, max_length=64)
        texts = tokenizer.batch_decode(out, skip_special_tokens=True)
        hits += sum(t == corpus.french(n) for t, n in zip(texts, chunk, strict=True))
    return hits / len(numbers)


__all__ = [
    "DEFAULT_CHECKPOINT",
    "TRANSFORMER",
    "MarianTraining",
    "Transformer",
    "config_only",
    "decode_settings",
    "hf_reference",
    "limits",
    "verification_texts",
]
