"""``build_engines nmt --engine ctranslate2``: what the build writes (the default, ``nmt`` itself
the kit's ctranslate2 backend in text mode; ``--no-ct2-text``, ``nmt_ct2`` for that backend and
a python ``nmt`` calling it), what it refuses, and the headers the backend compiles against
(third_party/ctranslate2, sha256-pinned)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.cli import build_from_argv
from triton_kit.build_engines.repository import parse
from triton_kit.build_engines.steps import BuildError
from triton_kit.server.model_backends import model_backends
from triton_kit.server.native_backends.ct2_backend import HEADERS, check_headers
from triton_kit.server.native_backends.errors import NativeBackendError

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def _build(root: Path, *flags: str) -> Path:
    repo = root / "repo"
    argv = ["nmt", "--engine", "ctranslate2", *flags, "--output-repository", str(repo)]
    build_from_argv([*argv, "--work-dir", str(root / "work")])
    return repo


def _parameters(repo: Path, model: str) -> dict[str, str]:
    config = parse((repo / model / "config.pbtxt").read_text())
    return {key: value.string_value for key, value in config.parameters.items()}


@pytest.fixture(scope="module")
def int8_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python ``nmt`` in front of ``nmt_ct2`` (``--no-ct2-text``)."""
    return _build(tmp_path_factory.mktemp("ct2-int8"), "--no-ct2-text", "--threads", "1")


def test_no_ct2_text_writes_nmt_ct2_for_the_backend_and_nmt_calls_it(int8_repo: Path) -> None:
    assert model_backends(int8_repo) == {"nmt": "python", "nmt_ct2": "ctranslate2"}
    files = {p.name for p in (int8_repo / "nmt_ct2" / "1").iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json"} <= files
    ct2 = _parameters(int8_repo, "nmt_ct2")
    assert ct2["compute_type"] == "int8"  # the engine's default precision
    assert ct2["intra_threads"] == "1" and ct2["patience"] == "2"
    config = parse((int8_repo / "nmt_ct2" / "config.pbtxt").read_text())
    assert config.max_batch_size == 32 and config.input[0].allow_ragged_batch
    assert config.HasField("dynamic_batching")
    assert _parameters(int8_repo, "nmt")["generate_model"] == "nmt_ct2"
    assert not (int8_repo / "nmt_encoder").exists()  # no step models: the engine is whole


def test_fp32_writes_float32_weights(tmp_path: Path) -> None:
    repo = _build(tmp_path, "--precision", "fp32")
    assert _parameters(repo, "nmt")["compute_type"] == "float32"
    repo = _build(tmp_path / "bls", "--precision", "fp32", "--no-ct2-text")
    assert _parameters(repo, "nmt_ct2")["compute_type"] == "float32"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--precision", "fp16"], "builds int8 or fp32"),
        (["--architecture", "rnn"], "no converter for this recurrent model"),
    ],
)
def test_refuses_what_it_cannot_build(tmp_path: Path, flags: list[str], words: str) -> None:
    with pytest.raises(BuildError, match=words):
        _build(tmp_path, *flags)


def test_other_families_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="converts a whole Marian model"):
        argv = ["bert", "--engine", "ctranslate2", "--output-repository", str(tmp_path / "r")]
        build_from_argv([*argv, "--work-dir", str(tmp_path / "w")])


def test_the_vendored_headers_are_pinned(tmp_path: Path) -> None:
    assert "include/ctranslate2/models/sequence_to_sequence.h" in check_headers()
    copy = tmp_path / "ctranslate2"
    shutil.copytree(HEADERS, copy)
    header = copy / "include" / "ctranslate2" / "vocabulary.h"
    header.write_text(header.read_text() + "\n// edited\n")
    with pytest.raises(NativeBackendError, match=r"vocabulary\.h does not match"):
        check_headers(copy)


def test_switching_builds_removes_the_models_nothing_calls_any_more(tmp_path: Path) -> None:
    """A repository built with the Python search, rebuilt with the default (an upgraded
    checkout's `make models`), serves no leftover nmt_encoder/nmt_decoder; rebuilt with
    --no-ct2-text, nmt_ct2 behind the python nmt; with the default again (the text mode), no
    leftover nmt_ct2 nor python model file; with the Python search again, only its models. The
    recurrent model's models stay untouched."""
    repo = tmp_path / "repo"
    common = ["--output-repository", str(repo), "--work-dir", str(tmp_path / "work")]
    common += ["--verify-sentences", "2"]
    python_search = ["nmt", "--engine", "onnxruntime", "--search", "python", *common]
    build_from_argv(python_search)
    (repo / "nmt_rnn_encoder").mkdir()
    (repo / "nmt_rnn_encoder" / "config.pbtxt").write_text('name: "nmt_rnn_encoder"\n')
    rnn = {"nmt_rnn_encoder": model_backends(repo)["nmt_rnn_encoder"]}
    assert set(model_backends(repo)) == {"nmt", "nmt_encoder", "nmt_decoder", "nmt_rnn_encoder"}
    build_from_argv(["nmt", *common])
    assert set(model_backends(repo)) == {"nmt", "nmt_rnn_encoder"}
    assert model_backends(repo)["nmt"] == "ctranslate2"
    build_from_argv(["nmt", "--no-ct2-text", *common])
    assert model_backends(repo) == {"nmt": "python", "nmt_ct2": "ctranslate2", **rnn}
    build_from_argv(["nmt", *common])
    assert model_backends(repo) == {"nmt": "ctranslate2", **rnn}
    assert not (repo / "nmt" / "1" / "model.py").exists()
    build_from_argv(python_search)
    assert set(model_backends(repo)) == {"nmt", "nmt_encoder", "nmt_decoder", "nmt_rnn_encoder"}


@pytest.mark.parametrize("flags", [(), ("--ct2-text",)], ids=["default", "named"])
def test_ct2_text_writes_nmt_as_the_backends_text_model(tmp_path: Path, flags) -> None:
    """The default (``--ct2-text``, named or left out): ``nmt`` itself is the ctranslate2
    backend in text mode, with the python ``nmt`` model's tensors and limits; no python model
    and no ``nmt_ct2``."""
    repo = _build(tmp_path, *flags, "--threads", "1")
    assert model_backends(repo) == {"nmt": "ctranslate2"}
    files = {p.name for p in (repo / "nmt" / "1").iterdir()}
    assert files == {"model.bin", "config.json", "shared_vocabulary.json", "source.spm"}
    config = parse((repo / "nmt" / "config.pbtxt").read_text())
    inputs = [(t.name, t.data_type, list(t.dims), t.optional) for t in config.input]
    assert inputs == [
        ("TEXT", mc.TYPE_STRING, [1], False),
        ("BEAM_SIZE", mc.TYPE_INT32, [1], True),
        ("MAX_LENGTH", mc.TYPE_INT32, [1], True),
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.output] == [
        ("TRANSLATION", mc.TYPE_STRING, [1])
    ]
    assert config.max_batch_size == 32 and config.HasField("dynamic_batching")
    text = _parameters(repo, "nmt")
    assert text["source_spm"] == "source.spm" and text["compute_type"] == "int8"
    # The python nmt model's limits (its config's parameters, from the same checkpoint).
    python = _parameters(_build(tmp_path / "python", "--no-ct2-text", "--threads", "1"), "nmt")
    for key in ("max_beam_size", "max_target_length", "max_source_length"):
        assert text[key] == python[key], key
    assert int(text["max_decoding_length"]) == int(python["default_max_length"]) - 1
    assert text["beam_size"] == python["default_beam_size"]
    assert (text["max_text_bytes"], text["max_beam_tokens"]) == ("65536", "16384")


def test_ct2_text_needs_the_ctranslate2_engine(tmp_path: Path) -> None:
    argv = ["nmt", "--engine", "onnxruntime", "--ct2-text", "--output-repository", str(tmp_path)]
    with pytest.raises(BuildError, match=r"--ct2-text .* needs --engine ctranslate2"):
        build_from_argv([*argv, "--work-dir", str(tmp_path / "w")])
    assert not (tmp_path / "nmt").exists()


def test_ct2_text_is_the_transformers_default() -> None:
    """Left out, resolved per architecture (families/nmt/defaults.py): on for the
    Transformer's CTranslate2 build; tests/unit/build_engines/test_nmt_defaults.py has the rest."""
    from triton_kit.build_engines.families.nmt import NmtOptions

    assert NmtOptions().ct2_text is None
    assert NmtOptions().ct2_text_for("ctranslate2") is True
