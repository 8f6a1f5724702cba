"""The whole search as one TorchScript module (``nmt_generate`` of ``--engine torch --search
engine``): token for token Hugging Face ``generate``, and the numpy search over the same
traced step modules.

Two checkpoints: the committed number model (held-out sentences, which its training never
saw) and the seeded random small Marian of test_nmt_parity (its hypotheses end at varied
lengths, so beams finish, drop out and get cut by ``max_length`` at many different steps).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.build.build_engines.test_nmt_parity import _random_checkpoint, _random_sources
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.torch_search import CHECK_BEAMS, check_search
from triton_kit.build_engines.families.nmt.torchscript.generate import (
    GenerationModule,
    generate,
    run_module,
)
from triton_kit.build_engines.families.nmt.torchscript.generate import (
    generation_module as search_module,
)
from triton_kit.build_engines.families.nmt.torchscript.steps import search_steps, step_model
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.transformer import (
    TRANSFORMER,
    decode_settings,
    hf_reference,
)
from triton_kit.python_models.nmt import decode
from triton_kit.python_models.nmt.decode import Job


def generation_module(model, settings, *args, **kwargs) -> torch.jit.ScriptModule:
    return search_module(TRANSFORMER, model, settings, *args, **kwargs)


def check_against_hf(module, checkpoint, texts, max_length, device, precision) -> None:
    """The build's check of ``module`` against HF ``generate`` (what ``--search engine`` runs)."""
    reference = hf_reference(checkpoint, texts, max_length, CHECK_BEAMS)
    check_search(module, reference, max_length, f"nmt_generate ({precision}, {device})", precision)


pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses"),
]


class Checkpoint:
    """A Marian checkpoint, its tokenizer and settings, and scripted modules per settings."""

    def __init__(self, directory: Path) -> None:
        from transformers import MarianMTModel, MarianTokenizer

        self.model = MarianMTModel.from_pretrained(str(directory), attn_implementation="eager")
        self.model.eval()
        self.tokenizer = MarianTokenizer.from_pretrained(str(directory))
        self.settings = decode_settings(self.model)
        self._modules: dict = {}

    def module(self, **changes) -> torch.jit.ScriptModule:
        settings = dataclasses.replace(self.settings, **changes)
        if settings not in self._modules:
            self._modules[settings] = generation_module(self.model, settings)
        return self._modules[settings]

    def jobs(self, texts: list[str], beams: list[int], max_lengths: list[int]) -> list[Job]:
        encoded = [self.tokenizer(t)["input_ids"] for t in texts]
        return [Job(e, b, m) for e, b, m in zip(encoded, beams, max_lengths, strict=True)]

    def generate(self, jobs: list[Job], **changes) -> list[list[int]]:
        return generate(self.module(**changes), jobs)

    def hf(self, texts: list[str], beam: int, max_length: int, **options) -> list[list[int]]:
        """HF ``generate`` ids (start token and trailing padding off)."""
        batch = self.tokenizer(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            out = self.model.generate(
                **batch, num_beams=beam, max_length=max_length, do_sample=False, **options
            )
        rows = []
        for row in out.tolist():
            row = row[1:]
            while row and row[-1] == self.settings.pad_token_id:
                row.pop()
            rows.append(row)
        return rows


@pytest.fixture(scope="module")
def number_model() -> Checkpoint:
    torch.set_num_threads(1)
    return Checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> Checkpoint:
    return Checkpoint(_random_checkpoint(tmp_path_factory.mktemp("generate") / "checkpoint"))


def _held_out(count: int) -> list[str]:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [corpus.english(n) for n in list(split.test)[:count]]


@pytest.mark.parametrize("length_penalty", [0.6, 1.0, 2.0])
@pytest.mark.parametrize("max_length", [64, 7])
@pytest.mark.parametrize("beam", [1, 4])
def test_number_model_matches_hf_and_the_numpy_search(
    number_model, beam, max_length, length_penalty
):
    """24 held-out sentences of mixed lengths in one call; ``max_length`` 7 cuts most of them
    (forced EOS at the limit)."""
    texts = _held_out(24)
    jobs = number_model.jobs(texts, [beam] * 24, [max_length] * 24)
    got = number_model.generate(jobs, length_penalty=length_penalty)
    expected = number_model.hf(texts, beam, max_length, length_penalty=length_penalty)
    assert got == expected
    settings = dataclasses.replace(number_model.settings, length_penalty=length_penalty)
    assert got == decode.generate(step_model(number_model.model, "cpu"), jobs, settings)
    lengths = {len(ids) for ids in got}
    assert len(lengths) >= 3 or max_length < 64  # sentences left at several steps
    if max_length == 7:
        assert any(len(ids) == 6 and ids[-1] == number_model.settings.eos_token_id for ids in got)


def test_each_row_keeps_its_own_max_length(number_model):
    """Rows of one call with different limits: each as HF with that limit gives it."""
    texts = _held_out(18)
    limits = [64, 6, 11] * 6
    jobs = number_model.jobs(texts, [4] * 18, limits)
    sequences = run_module(number_model.module(), jobs)
    assert sequences.shape[0] == 18
    got = number_model.generate(jobs)
    for limit in set(limits):
        rows = [i for i, m in enumerate(limits) if m == limit]
        expected = number_model.hf([texts[i] for i in rows], 4, limit)
        assert [got[i] for i in rows] == expected, limit


def test_mixed_beams_and_limits_match_the_numpy_search(number_model):
    """The adapter's job/result shape is decode.generate's (benchmarks time them alike)."""
    texts = _held_out(24)
    jobs = number_model.jobs(texts, [1, 4, 3] * 8, [9, 64, 14] * 8)
    expected = decode.generate(step_model(number_model.model, "cpu"), jobs, number_model.settings)
    assert number_model.generate(jobs) == expected


@pytest.mark.parametrize(
    ("beam", "max_length", "options"),
    [
        (1, 24, {}),
        (4, 24, {}),
        (3, 12, {"length_penalty": 0.6}),
        (4, 24, {"length_penalty": 2.0, "early_stopping": True}),
        (4, 24, {"length_penalty": 0.4, "early_stopping": "never"}),
        (5, 16, {"length_penalty": -0.5}),
    ],
)
def test_random_marian_matches_hf(random_model, beam, max_length, options):
    texts = _random_sources(24)
    jobs = random_model.jobs(texts, [beam] * 24, [max_length] * 24)
    got = random_model.generate(jobs, **options)
    assert got == random_model.hf(texts, beam, max_length, **options)
    assert len({len(ids) for ids in got}) >= 2  # hypotheses ended at varied lengths


class _Rows(torch.nn.Module):
    """The search's decoder step, recording how many rows each step decodes."""

    def __init__(self, decoder) -> None:
        super().__init__()
        self.decoder = decoder
        self.rows: list[int] = []

    def begin(self, *args):
        return self.decoder.begin(*args)

    def step(self, tokens, *args):
        self.rows.append(int(tokens.shape[0]))
        return self.decoder.step(tokens, *args)

    def expand(self, *args):
        return self.decoder.expand(*args)

    def keep(self, *args):
        return self.decoder.keep(*args)


@pytest.mark.parametrize("beam", [1, 4])
def test_finished_sentences_leave_the_batch(random_model, beam):
    """A finished sentence's rows are not decoded again: the rows per step fall as sentences
    end (eager module over the search's steps, the scripted one's code)."""
    encoder, decoder = search_steps(random_model.model, "cpu", torch.float32)
    recorder = _Rows(decoder)
    module = GenerationModule(encoder, recorder, random_model.settings)
    texts = _random_sources(12)
    limits = [24] * 9 + [6, 9, 12]  # three rows cut early whatever the weights pick
    jobs = random_model.jobs(texts, [beam] * 12, limits)
    got = generate(module, jobs)
    assert got == [random_model.hf([t], beam, m)[0] for t, m in zip(texts, limits, strict=True)]
    rows = recorder.rows
    assert rows[0] == 12  # the first step: one row per sentence (its beams are copies)
    assert all(r % beam == 0 for r in rows[1:]) and rows[1:] == sorted(rows[1:], reverse=True)
    assert rows[-1] <= rows[1] - 3 * beam  # the cut sentences left before the last step
    assert len(rows) == max(len(ids) for ids in got)  # no step after the last sentence ended


def test_half_precision_computes_in_half(number_model):
    """FP16 (CPU here, the GPU build's dtype): the cache is half, scores float32; same ids."""
    module = generation_module(number_model.model, number_model.settings, "cpu", torch.float16)
    weights = [n.output().toIValue() for n in module.graph.findAllNodes("prim::Constant")]
    dtypes = {w.dtype for w in weights if isinstance(w, torch.Tensor) and w.is_floating_point()}
    assert dtypes == {torch.float16}  # every frozen weight in half
    texts = _held_out(16)
    for beam in (1, 4):
        jobs = number_model.jobs(texts, [beam] * 16, [64] * 16)
        got = generate(module, jobs)
        assert got == number_model.hf(texts, beam, 64)


def test_saved_module_loads_and_refuses_mixed_beams(number_model, tmp_path):
    """What Triton's pytorch backend loads; one beam size per call."""
    path = tmp_path / "model.pt"
    number_model.module().save(str(path))
    loaded = torch.jit.load(str(path))
    texts = _held_out(4)
    jobs = number_model.jobs(texts, [4] * 4, [64] * 4)
    settings = number_model.settings
    assert generate(loaded, jobs) == (number_model.hf(texts, 4, 64))
    ids = torch.tensor([jobs[0].source_ids, jobs[0].source_ids])
    with pytest.raises(torch.jit.Error, match="same num_beams"):
        loaded(ids, torch.ones_like(ids), torch.tensor([[1], [4]]), torch.tensor([[64], [64]]))
    out = loaded(ids, torch.ones_like(ids), torch.tensor([[2], [2]]), torch.tensor([[2], [9]]))
    assert out.dtype == torch.int64 and out[0, 0] == settings.eos_token_id  # forced at once
    assert out.shape[1] == len(number_model.hf(texts[:1], 2, 9)[0])


def test_the_build_check_fails_a_wrong_search_and_a_broken_half(number_model, capsys):
    """A search that differs from HF on some sentences (one more banned token: the first one
    HF generates) fails the fp32 check and passes the fp16 one, logged (near-ties may flip in
    half); one that differs on every sentence (EOS banned too) fails both."""
    from triton_kit.build_engines.steps import BuildError

    texts = _held_out(16)
    first = number_model.hf(texts[:1], 4, 64)[0][0]
    suppressed = number_model.settings.suppressed_token_ids
    some = number_model.module(suppressed_token_ids=(*suppressed, first))
    every = number_model.module(
        suppressed_token_ids=(*suppressed, first, number_model.settings.eos_token_id)
    )
    check = (DEFAULT_CHECKPOINT, texts, 64, "cpu")
    with pytest.raises(BuildError, match="differ from HF generate at beam 1"):
        check_against_hf(some, *check, "fp32")
    check_against_hf(some, *check, "fp16")
    assert "(fp16, cpu) vs HF generate, beam 4: 10/16" in capsys.readouterr().out
    with pytest.raises(BuildError, match="16 of 16 sentences differ"):
        check_against_hf(every, *check, "fp16")
    check_against_hf(number_model.module(), *check, "fp32")  # the real search passes


@pytest.fixture(scope="module")
def int8_loaded(number_model, tmp_path_factory) -> torch.jit.ScriptModule:
    """``--precision int8-dynamic``'s module (qint8 linear layers), saved and loaded back."""
    path = tmp_path_factory.mktemp("int8") / "model.pt"
    generation_module(number_model.model, number_model.settings, int8_dynamic=True).save(str(path))
    return torch.jit.load(str(path))


def test_int8_dynamic_module_runs_quantized_linear_layers(int8_loaded, number_model):
    assert "quantized::linear_dynamic" in torch.jit.export_opnames(int8_loaded)
    assert "quantized::linear_dynamic" not in torch.jit.export_opnames(number_model.module())


@pytest.mark.parametrize("beam", [1, 4])
def test_int8_dynamic_module_agrees_with_hf(number_model, int8_loaded, beam):
    """Held-out sentences and the same words shuffled (the model is unsure there, so near-ties
    that int8 may flip): the build's threshold of them are HF fp32's ids."""
    from triton_kit.build_engines.families.nmt.torch_search import MIN_AGREEMENT

    texts = _held_out(16)
    rng = np.random.default_rng(7)
    texts += [" ".join(rng.permutation(t.split())) for t in texts]
    jobs = number_model.jobs(texts, [beam] * len(texts), [64] * len(texts))
    got = generate(int8_loaded, jobs)
    same = sum(g == e for g, e in zip(got, number_model.hf(texts, beam, 64), strict=True))
    print(f"int8-dynamic vs HF, beam {beam}: {same}/{len(texts)}")
    assert same >= MIN_AGREEMENT["int8-dynamic"] * len(texts)


def test_the_build_check_passes_int8_and_fails_a_broken_int8(number_model, int8_loaded):
    """An int8 search that differs on every sentence (EOS banned) fails the int8 check."""
    from triton_kit.build_engines.steps import BuildError

    texts = _held_out(16)
    check = (DEFAULT_CHECKPOINT, texts, 64, "cpu", "int8-dynamic")
    check_against_hf(int8_loaded, *check)
    settings = number_model.settings
    banned = (*settings.suppressed_token_ids, settings.eos_token_id)
    no_eos = dataclasses.replace(settings, suppressed_token_ids=banned)
    broken = generation_module(number_model.model, no_eos, int8_dynamic=True)
    with pytest.raises(BuildError, match="16 of 16 sentences differ"):
        check_against_hf(broken, *check)
