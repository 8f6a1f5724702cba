"""The served decode code (numpy search + exported ONNX) against Hugging Face ``generate``.

Two checkpoints go through the real build: the default number model, and a
randomly initialised small Marian whose sentencepiece models are trained here,
so the export path is exercised on a checkpoint it has never seen.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from tests.support.nmt_reference import InProcess, hf_generate
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.vocab import write_tokenizer

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def _build(checkpoint: Path, repository: Path, work: Path) -> None:
    from triton_kit.build_engines.cli import build_from_argv

    argv = ["nmt", "--checkpoint", str(checkpoint), "--max-beam-size", "16"]
    argv += ["--engine", "onnxruntime", "--search", "python"]  # the search these tests check
    argv += ["--verify-sentences", "8", "--output-repository", str(repository)]
    argv += ["--work-dir", str(work), "--instances", "1", "--threads", "2"]
    build_from_argv(argv)


def _load(checkpoint: Path, tmp: Path):
    from transformers import MarianMTModel, MarianTokenizer

    repository, work = tmp / "repo", tmp / "work"
    _build(checkpoint, repository, work)
    model = MarianMTModel.from_pretrained(str(checkpoint)).eval()
    tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
    served = InProcess(
        model,
        repository / "nmt" / "1",
        repository / "nmt_encoder" / "1" / "model.onnx",
        repository / "nmt_decoder" / "1" / "model.onnx",
    )
    return model, tokenizer, served


@pytest.fixture(scope="module")
def default_model(tmp_path_factory):
    return _load(DEFAULT_CHECKPOINT, tmp_path_factory.mktemp("nmt_default"))


def _random_checkpoint(directory: Path) -> Path:
    """German → Spanish number phrases for the vocabularies; weights random (seeded)."""
    from num2words import num2words
    from transformers import MarianConfig, MarianMTModel

    rng = random.Random(7)
    numbers = [rng.randint(0, 99_999) for _ in range(3000)]
    sources = [num2words(n, lang="de") for n in numbers]
    targets = [num2words(n, lang="es") for n in numbers]
    write_tokenizer(directory, sources, targets, vocab_size=60, max_length=64)
    import json

    vocab_size = len(json.loads((directory / "vocab.json").read_text()))
    torch.manual_seed(11)
    config = MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
        scale_embedding=True,
        init_std=0.3,
        pad_token_id=vocab_size - 1,
        eos_token_id=0,
        decoder_start_token_id=vocab_size - 1,
        forced_eos_token_id=0,
    )
    model = MarianMTModel(config).eval()
    with torch.no_grad():  # make </s> likely enough that hypotheses end at varied lengths
        model.final_logits_bias[0, 0] = 3.0
    model.generation_config.bad_words_ids = [[config.pad_token_id]]
    model.generation_config.max_length = 24
    model.save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nmt_random")
    checkpoint = _random_checkpoint(tmp / "checkpoint")
    return _load(checkpoint, tmp)


def _held_out(count: int) -> list[str]:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [corpus.english(n) for n in split.test[:count]]


def _random_sources(count: int) -> list[str]:
    from num2words import num2words

    rng = random.Random(3)
    return [num2words(rng.randint(0, 99_999), lang="de") for _ in range(count)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("beam", "max_length", "length_penalty"),
    [(1, 64, 1.0), (4, 64, 1.0), (3, 12, 0.6)],
)
def test_default_model_matches_hf_generate(default_model, beam, max_length, length_penalty):
    model, tokenizer, served = default_model
    texts = _held_out(60)
    expected = hf_generate(model, tokenizer, texts, beam, max_length, length_penalty)
    assert served.ids(texts, beam, max_length, length_penalty) == expected


# Not slow (~40 s with its build): ends at varied lengths, so it is what catches a wrong
# length penalty in every CI run.
@pytest.mark.parametrize(
    ("beam", "max_length", "length_penalty"),
    [(1, 24, 1.0), (4, 24, 1.0), (5, 16, 0.5), (3, 20, 2.0), (2, 8, -1.0)],
)
def test_random_marian_matches_hf_generate(random_model, beam, max_length, length_penalty):
    model, tokenizer, served = random_model
    texts = _random_sources(24)
    expected = hf_generate(model, tokenizer, texts, beam, max_length, length_penalty)
    got = served.ids(texts, beam, max_length, length_penalty)
    assert got == expected
    lengths = {len(row) for row in expected}
    assert len(lengths) >= 2, "the reference should end hypotheses at varied lengths"


def test_random_marian_detokenises_like_marian_tokenizer(random_model):
    _, tokenizer, served = random_model
    texts = _random_sources(24)
    ids = served.ids(texts, 4, 24)
    assert [served.text.decode(row) for row in ids] == tokenizer.batch_decode(
        ids, skip_special_tokens=True
    )


@pytest.mark.slow
def test_default_model_meets_the_quality_bar_in_process(default_model):
    _, _, served = default_model
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    texts = [corpus.english(n) for n in split.test]
    got = served.translate(texts, beam=4, max_length=64)
    exact = sum(g == corpus.french(n) for g, n in zip(got, split.test, strict=True)) / len(texts)
    assert len(texts) == 500
    assert exact >= 0.95


@pytest.fixture(scope="module")
def repository_model(nmt_python_search):
    """The checkpoint as the session's Python search build exported it (the default build's
    nmt is CTranslate2's, with no step models)."""
    from transformers import MarianMTModel, MarianTokenizer

    model = MarianMTModel.from_pretrained(str(DEFAULT_CHECKPOINT)).eval()
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    served = InProcess(
        model,
        nmt_python_search / "nmt" / "1",
        nmt_python_search / "nmt_encoder" / "1" / "model.onnx",
        nmt_python_search / "nmt_decoder" / "1" / "model.onnx",
    )
    return model, tokenizer, served


@pytest.mark.parametrize(
    ("beam", "max_length", "length_penalty"),
    [(1, 64, 1.0), (3, 12, 0.6)],
)
def test_built_model_matches_hf_generate_fast(repository_model, beam, max_length, length_penalty):
    """A small subset of the slow parity, every CI run: short limits make length penalties bite."""
    model, tokenizer, served = repository_model
    texts = _held_out(16)
    expected = hf_generate(model, tokenizer, texts, beam, max_length, length_penalty)
    assert served.ids(texts, beam, max_length, length_penalty) == expected
