"""The recurrent model's whole search as one TorchScript module (``nmt_rnn_generate`` of
``--architecture rnn --engine torch --search engine``): the module class the Transformer's
``nmt_generate`` uses, over the traced GRU encoder and a decoder step that gathers the
recurrent state by ``beam_index``.

References: a plain PyTorch beam search over the eager model (tests/support/nmt_reference,
nothing of python_models' search) and the Python search the served ``nmt_rnn`` runs today
(``triton_kit.python_models.nmt.decode`` over the exported ONNX files in ONNX Runtime). The
module under test is the saved file, freshly loaded (what Triton's pytorch backend runs).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import MarianTokenizer

from tests.support.nmt_reference import rnn_reference_search
from triton_kit.build_engines.cli import build_from_argv
from triton_kit.build_engines.families.nmt import DEFAULT_RNN_CHECKPOINT, corpus
from triton_kit.build_engines.families.nmt.export import export_decoder, export_encoder
from triton_kit.build_engines.families.nmt.rnn import model as rnn_model
from triton_kit.build_engines.families.nmt.rnn.architecture import (
    RNN,
    decode_settings,
    python_search_reference,
)
from triton_kit.build_engines.families.nmt.torch_search import CHECK_BEAMS, check_search
from triton_kit.build_engines.families.nmt.torchscript.generate import generate, run_module
from triton_kit.build_engines.families.nmt.torchscript.generate import (
    generation_module as search_module,
)
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT, encode
from triton_kit.build_engines.steps import BuildError
from triton_kit.python_models.nmt import decode
from triton_kit.python_models.nmt.decode import Job
from triton_kit.python_models.nmt.ort import OrtStepModel


def generation_module(model, settings, **kwargs) -> torch.jit.ScriptModule:
    return search_module(RNN, model, settings, **kwargs)


def check_against_python_search(module, steps, settings, sources, max_length, precision="fp32"):
    """The build's check of ``module`` against the Python search over ``steps``."""
    reference = python_search_reference(steps, settings, sources, max_length, CHECK_BEAMS)
    label = f"nmt_rnn_generate ({precision}, cpu)"
    check_search(module, reference, max_length, label, precision)


pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.fixture(scope="module")
def model() -> rnn_model.RnnTranslator:
    torch.set_num_threads(1)
    return rnn_model.load(DEFAULT_RNN_CHECKPOINT)


@pytest.fixture(scope="module")
def loaded(model, tmp_path_factory) -> torch.jit.ScriptModule:
    """The scripted search, saved and loaded back."""
    path = tmp_path_factory.mktemp("rnn-generate") / "model.pt"
    generation_module(model, decode_settings(model)).save(str(path))
    return torch.jit.load(str(path))


@pytest.fixture(scope="module")
def onnx_steps(model, tmp_path_factory) -> OrtStepModel:
    """The exported ONNX step graphs in ONNX Runtime, as the served Python search runs them."""
    root = tmp_path_factory.mktemp("rnn-onnx")
    encoder = export_encoder(RNN, model, root / "encoder.onnx")
    return OrtStepModel(encoder, export_decoder(RNN, model, root / "decoder.onnx"), threads=1)


@pytest.fixture(scope="module")
def sources() -> list[list[int]]:
    """Held-out sentences, and the same words shuffled: the model is sure of held-out
    numbers, so beams seldom reorder there; shuffled words make it pick among rival beams."""
    tokenizer = MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))
    numbers = list(corpus.Split.load(DEFAULT_CHECKPOINT / "split.json").test[:12])
    texts = [corpus.english(n) for n in numbers]
    rng = np.random.default_rng(7)
    shuffled = [" ".join(rng.permutation(t.split())) for t in texts]
    return encode(tokenizer, texts + shuffled, False)


@pytest.mark.parametrize("max_length", [64, 9, 4, 2])
@pytest.mark.parametrize("beam", [1, 4])
def test_ids_equal_both_references(model, loaded, onnx_steps, sources, beam, max_length):
    jobs = [Job(s, beam, max_length) for s in sources]
    got = generate(loaded, jobs)
    assert got == [rnn_reference_search(model, s, beam, max_length) for s in sources]
    assert got == decode.generate(onnx_steps, jobs, decode_settings(model))
    if max_length == 64:
        assert len({len(ids) for ids in got}) >= 3  # sentences left at several steps


@pytest.mark.parametrize("beam", [1, 3])
def test_each_row_keeps_its_own_max_length(model, loaded, sources, beam):
    limits = [64, 6, 11] * (len(sources) // 3)
    jobs = [Job(s, beam, m) for s, m in zip(sources, limits, strict=True)]
    assert run_module(loaded, jobs).shape[0] == len(jobs)  # one call for every row
    expected = [rnn_reference_search(model, j.source_ids, beam, j.max_length) for j in jobs]
    assert generate(loaded, jobs) == expected


def test_the_build_check_fails_a_wrong_search(model, loaded, onnx_steps, sources):
    """One more banned token (the first one the reference generates) changes some
    sentences: the build's check fails, naming the beam; the real search passes."""

    settings = decode_settings(model)
    first = rnn_reference_search(model, sources[0], 1)[0]
    banned = (*settings.suppressed_token_ids, first)
    wrong = generation_module(model, dataclasses.replace(settings, suppressed_token_ids=banned))
    check = (onnx_steps, settings, sources[:8], 64)
    with pytest.raises(BuildError, match="differ from the Python search at beam 1"):
        check_against_python_search(wrong, *check)
    check_against_python_search(loaded, *check)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--search", "engine", "--precision", "fp16"], "builds fp32"),
        (["--search", "python"], "--search engine"),  # no TorchScript step models
    ],
)
def test_other_torch_builds_are_refused_before_any_work(tmp_path, flags, message):
    argv = ["nmt", "--architecture", "rnn", "--engine", "torch", *flags]
    argv += ["--output-repository", str(tmp_path / "repo"), "--work-dir", str(tmp_path / "w")]
    with pytest.raises(BuildError, match=message):
        build_from_argv(argv)
    assert not (tmp_path / "repo").exists() and not (tmp_path / "w").exists()


@pytest.fixture(scope="module")
def int8_loaded(model, tmp_path_factory) -> torch.jit.ScriptModule:
    """``--precision int8-dynamic``'s module (qint8 linear and GRU layers), saved and loaded."""
    path = tmp_path_factory.mktemp("rnn-int8") / "model.pt"
    generation_module(model, decode_settings(model), int8_dynamic=True).save(str(path))
    return torch.jit.load(str(path))


def test_int8_dynamic_module_runs_quantized_layers(int8_loaded, loaded):
    ops = torch.jit.export_opnames(int8_loaded)
    assert "quantized::linear_dynamic" in ops and "aten::quantized_gru.input" in ops
    assert "quantized::linear_dynamic" not in torch.jit.export_opnames(loaded)


@pytest.mark.parametrize("beam", [1, 4])
def test_int8_dynamic_module_agrees_with_the_python_search(
    model, int8_loaded, onnx_steps, sources, beam
):
    """Held-out and shuffled sentences: the build's threshold of them are the fp32 Python
    search's ids (int8 may flip a near-tie), and the build's check passes it."""
    from triton_kit.build_engines.families.nmt.torch_search import MIN_AGREEMENT

    jobs = [Job(list(s), beam, 64) for s in sources]
    expected = decode.generate(onnx_steps, jobs, decode_settings(model))
    got = generate(int8_loaded, jobs)
    same = sum(g == e for g, e in zip(got, expected, strict=True))
    print(f"int8-dynamic vs the Python search, beam {beam}: {same}/{len(jobs)}")
    assert same >= MIN_AGREEMENT["int8-dynamic"] * len(jobs)
    check = (onnx_steps, decode_settings(model), sources, 64)
    check_against_python_search(int8_loaded, *check, precision="int8-dynamic")


def test_a_broken_int8_search_fails_the_check(model, onnx_steps, sources):

    settings = decode_settings(model)
    banned = (*settings.suppressed_token_ids, settings.eos_token_id)
    no_eos = dataclasses.replace(settings, suppressed_token_ids=banned)
    broken = generation_module(model, no_eos, int8_dynamic=True)
    with pytest.raises(BuildError, match="differ from the Python search at beam 1"):
        check_against_python_search(
            broken, onnx_steps, settings, sources, 64, precision="int8-dynamic"
        )


@pytest.mark.parametrize("architecture", ["transformer", "rnn"])
def test_int8_dynamic_is_refused_where_a_gpu_is_visible(tmp_path, monkeypatch, architecture):
    """The build puts the search on a visible GPU, where dynamic quantised ops do not run: it
    refuses before any work (the GPU check is monkeypatched: none here)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    argv = ["nmt", "--architecture", architecture, "--engine", "torch", "--search", "engine"]
    argv += ["--precision", "int8-dynamic"]
    argv += ["--output-repository", str(tmp_path / "repo"), "--work-dir", str(tmp_path / "w")]
    with pytest.raises(BuildError, match="CPU only"):
        build_from_argv(argv)
    assert not (tmp_path / "repo").exists() and not (tmp_path / "w").exists()


def test_torch_int8_dynamic_needs_the_search_in_the_engine(tmp_path):
    argv = ["nmt", "--engine", "torch", "--precision", "int8-dynamic"]
    argv += ["--output-repository", str(tmp_path / "repo"), "--work-dir", str(tmp_path / "w")]
    with pytest.raises(BuildError, match="add --search engine"):
        build_from_argv(argv)
    assert not (tmp_path / "repo").exists() and not (tmp_path / "w").exists()
