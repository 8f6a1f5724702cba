"""Fast NMT checks without a server: tokenisation, settings, request parsing, configs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.prerequisites import MODEL_REPOSITORY, require_models
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.repository import parse
from triton_kit.python_models.common.base import InvalidInput
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.nmt.decode import DecodeSettings, Job, generate
from triton_kit.python_models.nmt.model import parse_rows
from triton_kit.python_models.nmt.settings import Limits, from_parameters, to_parameters
from triton_kit.python_models.nmt.text import MarianText

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

LIMITS = Limits(
    default_beam_size=4,
    max_beam_size=16,
    default_max_length=64,
    max_target_length=128,
    max_source_length=128,
)


@pytest.fixture(scope="module")
def tokenizer():
    import warnings

    from transformers import MarianTokenizer

    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    return MarianTokenizer.from_pretrained(str(DEFAULT_CHECKPOINT))


@pytest.fixture(scope="module")
def text() -> MarianText:
    return MarianText(DEFAULT_CHECKPOINT, LIMITS.max_source_length)


@pytest.mark.parametrize(
    "sentence",
    [
        "four hundred and twelve thousand and ninety-seven",
        "zero",
        "  seven   hundred ",
        "Ünïcödé, digits 42 and symbols ≥ ∑ 🙂",
        "x" * 300,
    ],
)
def test_encode_matches_marian_tokenizer(tokenizer, text, sentence) -> None:
    assert text.encode(sentence) == tokenizer(sentence, truncation=True)["input_ids"]


def test_ten_kilobytes_truncate_to_the_max_source_length(tokenizer, text) -> None:
    long = ("nine hundred and ninety-nine thousand, " * 260)[:10_000]
    ids = text.encode(long)
    assert len(ids) == LIMITS.max_source_length and ids[-1] == text.eos_id
    assert ids == tokenizer(long, truncation=True)["input_ids"]


def test_decode_matches_marian_tokenizer(tokenizer, text) -> None:
    french = [corpus.french(n) for n in (0, 80, 71_000, 412_097, 999_999)]
    for ids in tokenizer(text_target=french)["input_ids"]:
        assert text.decode(ids) == tokenizer.decode(ids, skip_special_tokens=True)


def test_settings_round_trip_through_parameters() -> None:
    settings = DecodeSettings(9, 0, 9, (3, 4, 32), (9, 5), False, 0.6, "never")
    parameters = {
        k: str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in to_parameters(settings, LIMITS).items()
    }
    assert from_parameters(ModelParameters(parameters)) == (settings, LIMITS)


def _request(texts: list[bytes], beam=None, max_length=None) -> dict[str, np.ndarray]:
    inputs = {"TEXT": np.array([[t] for t in texts], dtype=np.object_)}
    if beam is not None:
        inputs["BEAM_SIZE"] = np.array(beam, dtype=np.int32).reshape(-1, 1)
    if max_length is not None:
        inputs["MAX_LENGTH"] = np.array(max_length, dtype=np.int32).reshape(-1, 1)
    return inputs


def test_parse_rows_defaults_and_per_row_values(text) -> None:
    (job,) = parse_rows(_request([b"seven"]), text, LIMITS)
    assert (job.beam_size, job.max_length) == (4, 64)
    jobs = parse_rows(_request([b"one", b"two"], beam=[1, 3], max_length=[5, 9]), text, LIMITS)
    assert [(j.beam_size, j.max_length) for j in jobs] == [(1, 5), (3, 9)]


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (_request([b""]), "TEXT is empty"),
        (_request([b" \n\t"]), "TEXT is empty"),
        (_request([b"\xc3\x28"]), "not valid UTF-8"),
        (_request([b"seven"], beam=[0]), "BEAM_SIZE must be in 1..16, got 0"),
        (_request([b"seven"], beam=[-2]), "got -2"),
        (_request([b"seven"], beam=[1000]), "got 1000"),
        (_request([b"seven"], max_length=[0]), "MAX_LENGTH must be in 2..128"),
        (_request([b"seven"], max_length=[1]), "MAX_LENGTH must be in 2..128"),
        (_request([b"a", b"b", b"c"], beam=[1, 2]), "one per TEXT row"),
    ],
)
def test_parse_rows_rejects_bad_input(text, inputs, message) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_rows(inputs, text, LIMITS)


def _documented_io(repository: Path, backend: str = "python") -> None:
    """``nmt`` in ``repository``: a model taking TEXT, BEAM_SIZE and MAX_LENGTH and giving
    TRANSLATION; a python one's model.py the one-line import."""
    config = parse((repository / "nmt" / "config.pbtxt").read_text())
    assert config.backend == backend and config.max_batch_size > 0
    inputs = {(i.name, i.data_type, tuple(i.dims), i.optional) for i in config.input}
    assert inputs == {
        ("TEXT", 13, (1,), False),
        ("BEAM_SIZE", 8, (1,), True),
        ("MAX_LENGTH", 8, (1,), True),
    }
    assert [(o.name, o.data_type, tuple(o.dims)) for o in config.output] == [
        ("TRANSLATION", 13, (1,))
    ]
    if backend != "python":
        assert not (repository / "nmt" / "1" / "model.py").exists()
        return
    shim = (repository / "nmt" / "1" / "model.py").read_text()
    assert "from triton_kit.python_models.nmt.model import NmtModel as TritonPythonModel" in shim


def test_the_default_build_has_the_documented_io_in_the_ctranslate2_backend() -> None:
    """The default nmt: the python model's contract, served by the kit's ctranslate2 backend in
    its text mode (sentencepiece inside it), with no nmt_ct2 and no step models behind it."""
    require_models("nmt")
    _documented_io(MODEL_REPOSITORY, backend="ctranslate2")
    config = parse((MODEL_REPOSITORY / "nmt" / "config.pbtxt").read_text())
    assert config.parameters["source_spm"].string_value == "source.spm"
    assert (MODEL_REPOSITORY / "nmt" / "1" / "source.spm").is_file()
    assert not (MODEL_REPOSITORY / "nmt_ct2").exists()


def test_the_python_search_has_the_documented_io_over_onnx_steps(nmt_python_search) -> None:
    _documented_io(nmt_python_search)
    config = parse((nmt_python_search / "nmt" / "config.pbtxt").read_text())
    assert "generate_model" not in config.parameters
    for name in ("nmt_encoder", "nmt_decoder"):
        served = parse((nmt_python_search / name / "config.pbtxt").read_text())
        assert served.platform == "onnxruntime_onnx"


def test_short_requests_finish_before_long_ones(text, nmt_python_search) -> None:
    """on_done fires per sentence as it ends: what lets the BLS model answer early."""
    from triton_kit.python_models.nmt.ort import OrtStepModel

    runner = OrtStepModel(
        nmt_python_search / "nmt_encoder" / "1" / "model.onnx",
        nmt_python_search / "nmt_decoder" / "1" / "model.onnx",
        threads=1,
    )
    served = _served_parameters(nmt_python_search)
    settings = from_parameters(ModelParameters.from_config({"parameters": served}))[0]
    long = "nine hundred and ninety-nine thousand, nine hundred and ninety-nine"
    jobs = [Job(text.encode(long), 4, 64), Job(text.encode("seven"), 1, 64)]
    order: list[int] = []
    results = generate(runner, jobs, settings, on_done=lambda i, _ids: order.append(i))
    assert order == [1, 0]
    assert [text.decode(r) for r in results] == [corpus.french(999_999), "sept"]


def _served_parameters(repository: Path) -> dict:
    """The python ``nmt`` model's parameters in ``repository`` (the default nmt is not one)."""
    config = parse((repository / "nmt" / "config.pbtxt").read_text())
    return {k: {"string_value": v.string_value} for k, v in config.parameters.items()}


def test_the_search_model_lets_triton_prefetch(tmp_path, nmt_python_search) -> None:
    """No queue policy field on the BLS model: any of them turns off Triton's prefetching,
    and a request that arrives while an execute finishes then waits 500 ms (see
    triton_kit/build_engines/families/nmt/repository.py and
    test_a_lone_request_does_not_wait_in_the_queue)."""
    from triton_kit.build_engines.families.nmt.repository import write_bls
    from triton_kit.build_engines.options import BuildOptions

    parameters = ModelParameters.from_config({"parameters": _served_parameters(nmt_python_search)})
    settings, limits = from_parameters(parameters)
    options = BuildOptions(instances=1, threads=1)
    model_dir = write_bls(tmp_path, DEFAULT_CHECKPOINT, settings, limits, options)
    config = parse((model_dir / "config.pbtxt").read_text())
    batching = config.dynamic_batching
    assert config.HasField("dynamic_batching") and batching.max_queue_delay_microseconds == 0
    assert not batching.HasField("default_queue_policy") and not batching.priority_levels
