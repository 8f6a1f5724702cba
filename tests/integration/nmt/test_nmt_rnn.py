"""``nmt_rnn``: the recurrent (GRU + attention) model served by the same search as ``nmt``.

References: the PyTorch model itself (ONNX parity), a plain beam search written here
in PyTorch (it imports nothing from python_models), the held-out answers of
num2words, and the ``nmt`` model's own error messages for bad input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from transformers import MarianTokenizer

from tests.support.nmt_reference import rnn_reference_search as reference_beam_search
from tests.support.prerequisites import MODEL_REPOSITORY, require_models
from triton_kit.build_engines.families.nmt import DEFAULT_RNN_CHECKPOINT, corpus
from triton_kit.build_engines.families.nmt.export import export_decoder, export_encoder
from triton_kit.build_engines.families.nmt.rnn import model as rnn_model
from triton_kit.build_engines.families.nmt.rnn.architecture import (
    RNN,
    compare,
    decode_settings,
    limits,
    verification_ids,
)
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT, encode
from triton_kit.client import TritonClient
from triton_kit.python_models.nmt.decode import Job, generate
from triton_kit.python_models.nmt.ort import OrtStepModel

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

SAMPLE = "four hundred and twelve thousand and ninety-seven"
SAMPLE_FR = "quatre cent douze mille quatre-vingt-dix-sept"


@pytest.fixture(scope="module")
def model() -> rnn_model.RnnTranslator:
    return rnn_model.load(DEFAULT_RNN_CHECKPOINT)


@pytest.fixture(scope="module")
def tokenizer():
    return MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))


@pytest.fixture(scope="module")
def held_out() -> list[int]:
    return list(corpus.Split.load(DEFAULT_CHECKPOINT / "split.json").test)


@pytest.fixture(scope="module")
def in_process(model):
    """The served search (nmt_decode.generate) on the served ONNX files, in this process."""
    require_models("nmt_rnn", "nmt_rnn_encoder", "nmt_rnn_decoder")
    runner = OrtStepModel(
        MODEL_REPOSITORY / "nmt_rnn_encoder" / "1" / "model.onnx",
        MODEL_REPOSITORY / "nmt_rnn_decoder" / "1" / "model.onnx",
    )
    settings = decode_settings(model)

    def ids(sources: list[list[int]], beam: int, max_length: int = 64) -> list[list[int]]:
        return generate(runner, [Job(s, beam, max_length) for s in sources], settings)

    return ids


def test_onnx_matches_pytorch(model, tmp_path) -> None:
    encoder, decoder = tmp_path / "encoder.onnx", tmp_path / "decoder.onnx"
    export_encoder(RNN, model, encoder)
    export_decoder(RNN, model, decoder)
    parity = compare(model, encoder, decoder, *verification_ids(16))
    print(
        f"max abs diff: encoder {parity.encoder_max_abs_diff:.2e}, "
        f"decoder {parity.decoder_max_abs_diff:.2e}"
    )
    assert parity.encoder_max_abs_diff < 1e-4
    assert parity.decoder_max_abs_diff < 1e-3


def test_search_matches_a_plain_pytorch_beam_search(
    triton_server, model, tokenizer, in_process, held_out
) -> None:
    texts = [corpus.english(n) for n in held_out[:60]]
    sources = encode(tokenizer, texts, False)
    expected = [reference_beam_search(model, s, beam=4) for s in sources]
    assert in_process(sources, beam=4) == expected
    # The model is sure of held-out numbers, so beams seldom reorder there: words
    # shuffled and short limits make the search pick among rival beams.
    rng = np.random.default_rng(7)
    shuffled = [" ".join(rng.permutation(t.split())) for t in texts[:30]]
    uncertain = encode(tokenizer, shuffled, False)
    for beam, limit in ((4, 64), (3, 8), (5, 5)):
        expected_hard = [reference_beam_search(model, s, beam, limit) for s in uncertain]
        assert in_process(uncertain, beam, limit) == expected_hard, (beam, limit)
    with TritonClient(triton_server.grpc_url) as triton:
        served = triton.translate(texts, beam_size=4, model="nmt_rnn")
    assert served == [tokenizer.decode(ids, skip_special_tokens=True) for ids in expected]


def test_client_picks_the_model(triton_server) -> None:
    with TritonClient(triton_server.grpc_url) as triton:
        assert triton.translate(SAMPLE, model="nmt_rnn") == [SAMPLE_FR]
        assert triton.translate(["seven"], beam_size=1, model="nmt_rnn") == ["sept"]


@pytest.mark.slow
def test_held_out_exact_match_in_process_equals_served(
    triton_server, tokenizer, in_process, held_out
) -> None:
    texts = [corpus.english(n) for n in held_out]
    answers = [corpus.french(n) for n in held_out]
    local_ids = in_process(encode(tokenizer, texts, False), beam=4)
    local = [tokenizer.decode(ids, skip_special_tokens=True) for ids in local_ids]
    with TritonClient(triton_server.grpc_url) as triton:
        served = triton.translate(texts, beam_size=4, model="nmt_rnn")
    exact_local = np.mean([a == b for a, b in zip(local, answers, strict=True)])
    exact_served = np.mean([a == b for a, b in zip(served, answers, strict=True)])
    print(f"exact match (beam 4, 500): {exact_local:.3f} in-process, {exact_served:.3f} served")
    assert len(texts) == 500
    assert served == local
    assert exact_served == exact_local >= 0.95


BAD = [
    (b"", None, None),
    (b"   ", None, None),
    (b"seven \xff\xfe", None, None),
    (b"seven", 0, None),
    (b"seven", 1000, None),
    (b"seven", None, 0),
    (b"seven", None, 1000),
]


@pytest.mark.parametrize(("text", "beam", "max_length"), BAD)
def test_bad_input_gets_the_same_errors_as_nmt(triton_server, text, beam, max_length) -> None:
    require_models("nmt", "nmt_rnn")
    client = grpcclient.InferenceServerClient(triton_server.grpc_url.removeprefix("grpc://"))
    errors = []
    for name in ("nmt", "nmt_rnn"):
        with pytest.raises(Exception) as caught:
            client.infer(name, _inputs(text, beam, max_length))
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
        errors.append(caught.value.message())
    assert errors[0] == errors[1]
    client.close()
    with TritonClient(triton_server.grpc_url) as triton:
        assert triton.translate("seven", model="nmt_rnn") == ["sept"]


def test_limits_match_nmt(model) -> None:
    bounds = limits(model, 16)
    assert (bounds.max_beam_size, bounds.default_beam_size, bounds.default_max_length) == (
        16,
        4,
        64,
    )


def _inputs(text: bytes, beam: int | None, max_length: int | None) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("TEXT", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[text]], dtype=np.object_))
    inputs = [tensor]
    for name, value in (("BEAM_SIZE", beam), ("MAX_LENGTH", max_length)):
        if value is not None:
            extra = grpcclient.InferInput(name, [1, 1], "INT32")
            extra.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            inputs.append(extra)
    return inputs


def _served_settings(name: str, repository: Path = MODEL_REPOSITORY):
    from triton_kit.build_engines.repository import parse
    from triton_kit.python_models.common.parameters import ModelParameters
    from triton_kit.python_models.nmt.settings import from_parameters

    if repository == MODEL_REPOSITORY:
        require_models(name)
    config = parse((repository / name / "config.pbtxt").read_text())
    values = {k: {"string_value": v.string_value} for k, v in config.parameters.items()}
    return from_parameters(ModelParameters.from_config({"parameters": values}))[0]


def test_served_configs_say_which_state_the_decoder_keeps(model, nmt_python_search) -> None:
    """The Transformer's python nmt (the Python search; the default nmt is the ctranslate2
    backend's text model, with no decode settings of its own)."""
    assert _served_settings("nmt_rnn") == decode_settings(model)
    assert _served_settings("nmt_rnn").recurrent_state is True
    assert _served_settings("nmt", nmt_python_search).recurrent_state is False


def test_tensorrt_dry_run_plans_both_graphs(tmp_path, capsys) -> None:
    """The plan of work for the served ONNX files: profiles cover rows = batch x beams."""
    from triton_kit.build_engines.engines.tensorrt.__main__ import main

    require_models("nmt_rnn_encoder", "nmt_rnn_decoder")
    argv = ["--output-repository", str(MODEL_REPOSITORY), "--work-dir", str(tmp_path / "b")]
    code = main([*argv, "--precision", "fp16", "nmt_rnn_encoder", "nmt_rnn_decoder"])
    out = capsys.readouterr().out
    assert code == 0
    assert "plan of work for nmt_rnn_encoder" in out and "plan of work for nmt_rnn_decoder" in out
    assert "past_kv:1x1x512x192" in out  # max rows: batch 32 x beam 16
    assert not (tmp_path / "b").exists()


def test_a_sentence_encodes_the_same_in_any_batch(model, tokenizer) -> None:
    """Padding after a short sentence must not reach it (the backward GRU included)."""
    short, long = encode(tokenizer, ["seven", SAMPLE], False)
    alone = torch.tensor([short])
    padded = torch.tensor([short + [139] * (len(long) - len(short)), long])
    with torch.no_grad():
        memory_alone, _ = model.encode(alone, torch.ones_like(alone))
        memory_batched, _ = model.encode(padded, (padded != 139).long())
    difference = (memory_batched[0, : len(short)] - memory_alone[0]).abs().max().item()
    assert difference < 1e-6
