"""``build_engines nmt``, the default build (``--engine ctranslate2 --ct2-text`` left out,
families/nmt/defaults.py): ``nmt`` itself is the kit's C++ ``ctranslate2`` backend in text mode
(TEXT in, TRANSLATION out, sentencepiece inside the backend), with no python model on the path.

References: num2words (the held-out numbers at beam 4), the converted model in this process
(the ``ctranslate2`` package, the library the backend links), and the python ``nmt`` model of
a ``--no-ct2-text`` build (tokenising in its stub, ``nmt_ct2`` through BLS), served beside it:
the same translations, and the same refusals with the same messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.batching import (
    counts_at_rest,
    first_co_batched,
    settled_counts,
)
from tests.support.nmt_requests import rows_request
from tests.support.served_build import build_repository, serving
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.client import TritonClient
from triton_kit.server.model_backends import model_backends

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses"),
]

MAX_SOURCE_LENGTH = 128  # the number model's positional table (the build's limits)


@pytest.fixture(scope="module")
def backend() -> Path:
    """The ctranslate2 backend built with its text mode (libsentencepiece-dev), which the
    default nmt is."""
    from triton_kit.server.native_backends import default_out
    from triton_kit.server.native_backends.__main__ import main
    from triton_kit.server.native_backends.build import missing_tools
    from triton_kit.server.native_backends.ct2_backend import sentencepiece_version

    missing = missing_tools()
    if missing:
        pytest.skip(f"cannot build the ctranslate2 backend: {', '.join(missing)} not found")
    if sentencepiece_version() is None:
        pytest.skip(
            "no libsentencepiece-dev, so no text mode and no default nmt: run "
            "scripts/install-system-deps.sh"
        )
    assert main(["build", "ctranslate2"]) == 0, "building the ctranslate2 backend failed"
    return default_out() / "ctranslate2" / "libtriton_ctranslate2.so"


@pytest.fixture(scope="module")
def repos(backend: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the default repository: the text mode, the --no-ct2-text one: python nmt, nmt_ct2)."""
    flags = ("nmt", "--instances", "1")  # the default: no --engine, no --ct2-text
    text, log = build_repository(tmp_path_factory.mktemp("ct2-text"), *flags)
    assert "vs references, beam 4: 16/16 exact" in log
    assert model_backends(text) == {"nmt": "ctranslate2"}
    python, _ = build_repository(tmp_path_factory.mktemp("ct2-python"), *flags, "--no-ct2-text")
    assert model_backends(python) == {"nmt": "python", "nmt_ct2": "ctranslate2"}
    return text, python


@pytest.fixture(scope="module")
def servers(repos: tuple[Path, Path], tmp_path_factory) -> Iterator[tuple[str, str]]:
    """gRPC URLs of (the text model, the python nmt path), both served at once."""
    logs = tmp_path_factory.mktemp("ct2-text-logs")
    with serving(repos[0], logs / "text.log") as text, serving(repos[1], logs / "py.log") as py:
        yield text.grpc_url, py.grpc_url


@pytest.fixture(scope="module")
def server(servers: tuple[str, str]) -> str:
    return servers[0]


@pytest.fixture(scope="module")
def in_process(repos: tuple[Path, Path]):
    """``translate(texts, beam, max_length)``: the converted model in this process, with the
    settings the backend serves."""
    import ctranslate2
    import sentencepiece as spm

    from triton_kit.python_models.nmt.generate import CT2_PATIENCE

    version = repos[0] / "nmt" / "1"
    translator = ctranslate2.Translator(
        str(version), device="cpu", compute_type="int8", intra_threads=1
    )
    source = spm.SentencePieceProcessor(model_file=str(version / "source.spm"))

    def translate(texts: list[str], beam: int, max_length: int = 64) -> list[str]:
        tokens = [[*source.encode(t, out_type=str)[: MAX_SOURCE_LENGTH - 1], "</s>"] for t in texts]
        results = translator.translate_batch(
            tokens, beam_size=beam, max_decoding_length=max_length - 1, patience=CT2_PATIENCE
        )
        return ["".join(r.hypotheses[0]).replace("\u2581", " ").strip() for r in results]

    return translate


def _held_out(count: int | None = None) -> list[int]:
    return list(corpus.Split.load(DEFAULT_CHECKPOINT / "split.json").test)[:count]


def _pieces(repos: tuple[Path, Path], text: str) -> int:
    import sentencepiece as spm

    model = spm.SentencePieceProcessor(model_file=str(repos[0] / "nmt" / "1" / "source.spm"))
    return len(model.encode(text, out_type=str))


def _request(
    url: str, texts: list[bytes], beam: int | None = None, max_length: int | None = None
) -> list[str] | InferenceServerException:
    """One request of ``texts`` (raw bytes), BEAM_SIZE/MAX_LENGTH sent only where given."""
    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    tensors = {"TEXT": np.array([[t] for t in texts], dtype=np.object_)}
    if beam is not None:
        tensors["BEAM_SIZE"] = np.full((len(texts), 1), beam, dtype=np.int32)
    if max_length is not None:
        tensors["MAX_LENGTH"] = np.full((len(texts), 1), max_length, dtype=np.int32)
    inputs = []
    for name, value in tensors.items():
        tensor = grpcclient.InferInput(
            name, list(value.shape), "BYTES" if name == "TEXT" else "INT32"
        )
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    try:
        result = client.infer("nmt", inputs, client_timeout=120)
        return [row[0].decode() for row in result.as_numpy("TRANSLATION")]
    except InferenceServerException as exc:
        return exc
    finally:
        client.close()


def test_held_out_exact_match_at_beam_4(server: str, in_process) -> None:
    """The default build: every held-out number, beam 4 (the default): the in-process model's
    translations, and as exact against num2words as the python path's test asks."""
    numbers = _held_out()
    texts, references = [corpus.english(n) for n in numbers], [corpus.french(n) for n in numbers]
    with TritonClient(server, timeout=300) as triton:
        served = triton.translate(texts, beam_size=4)
    exact = sum(s == r for s, r in zip(served, references, strict=True))
    print(f"served nmt (ct2 text mode, int8), beam 4: {exact}/{len(texts)} exact")
    assert served == in_process(texts, 4)
    assert exact >= 0.95 * len(texts), f"{exact}/{len(texts)}"


def _truncation_texts(repos: tuple[Path, Path]) -> list[str]:
    """Sources of MAX_SOURCE_LENGTH - 2 .. + 1 pieces (the "</s>" makes the limit) and far
    beyond it, so both paths cut at the same piece."""
    texts, words = [], []
    for n in range(1, 400):
        words.append(corpus.english(n))
        pieces = _pieces(repos, " ".join(words))
        if MAX_SOURCE_LENGTH - 2 <= pieces <= MAX_SOURCE_LENGTH + 1:
            texts.append(" ".join(words))
        if pieces > MAX_SOURCE_LENGTH + 1:
            break
    assert {_pieces(repos, t) for t in texts} & {MAX_SOURCE_LENGTH, MAX_SOURCE_LENGTH + 1}
    return [*texts, " ".join(["seven hundred and twelve"] * 60)]


def test_the_same_translations_as_the_python_nmt(servers, repos, in_process) -> None:
    """Held-out numbers, truncation-length sources, odd whitespace and characters the
    vocabulary lacks, at beam 1 and 4 and in one request of rows with their own settings: the
    text model answers exactly what the python nmt path answers."""
    text_url, python_url = servers
    texts = [corpus.english(n) for n in _held_out(16)]
    texts += _truncation_texts(repos)
    texts += ["\u3000seven\u00a0", "  twelve  \n", "seven \u2603 eight", "Seven,Eight!", "é"]
    for beam in (1, 4):
        served = _request(text_url, [t.encode() for t in texts], beam=beam, max_length=128)
        assert served == _request(python_url, [t.encode() for t in texts], beam, 128)
        assert served == in_process(texts, beam, 128)
    assert len(set(served)) > 15
    beams = [1, 4, 1, 4, 2, 3, 16, 1]
    limits = [64, 64, 2, 3, 64, 9, 128, 5]
    rows = [texts[i] for i in (0, 1, 2, 3, 16, 17, 18, 20)]
    mixed = rows_request(text_url, rows, beams, limits)
    assert mixed == rows_request(python_url, rows, beams, limits)
    assert mixed[0] == in_process([rows[0]], 1, 64)[0]


BAD_REQUESTS = [
    ([b""], {}, "TEXT is empty"),
    ([" \u3000\t".encode()], {}, "TEXT is empty"),
    ([b"seven \xff"], {}, "invalid start byte at byte 6"),
    ([b"seven \xe2\x82"], {}, "unexpected end of data at byte 6"),
    ([b"seven \xe2\x28\xa1"], {}, "invalid continuation byte at byte 6"),
    ([b"seven", b"\xed\xa0\x80"], {}, "not valid UTF-8"),  # a surrogate, in the 2nd row
    ([b"seven"], {"beam": 0}, "BEAM_SIZE must be in 1..16, got 0"),
    ([b"seven"], {"beam": 17}, "BEAM_SIZE must be in 1..16, got 17"),
    ([b"seven"], {"max_length": 1}, "MAX_LENGTH must be in 2..128"),
    ([b"seven"], {"max_length": 129}, "got 129"),
    ([b"x" * 65537], {}, "TEXT is 65537 bytes; the limit is 65536 bytes"),
    ([b"seven"] * 9, {"beam": 16, "max_length": 128}, "rows x BEAM_SIZE x MAX_LENGTH is 18432"),
]


@pytest.mark.parametrize(("texts", "settings", "words"), BAD_REQUESTS)
def test_bad_requests_get_the_python_models_refusals(servers, texts, settings, words) -> None:
    """INVALID_ARG with the python nmt model's message, word for word."""
    text_url, python_url = servers
    refused = _request(text_url, texts, **settings)
    expected = _request(python_url, texts, **settings)
    assert isinstance(refused, InferenceServerException), refused
    assert isinstance(expected, InferenceServerException), expected
    assert "INVALID_ARG" in str(refused.status()) and words in refused.message()
    assert refused.message() == expected.message()


def test_concurrent_requests_are_batched_and_bad_ones_fail_alone(server, in_process) -> None:
    """Requests sent at once share execute calls (Triton's statistics: fewer executions than
    requests); the bad ones among them get INVALID_ARG alone, the good ones their
    translations, and the server stays ready."""
    texts = [corpus.english(n) for n in _held_out(8)]
    bad = [([b""], "TEXT is empty"), ([b"\xff"], "not valid UTF-8"), ([b"x" * 70000], "bytes")]
    requests = (
        [[t.encode()] for t in texts[:4]] + [b for b, _ in bad] + [[t.encode()] for t in texts[4:]]
    )

    def send_all():
        before = counts_at_rest(server, "nmt")
        with ThreadPoolExecutor(len(requests)) as pool:
            answers = list(pool.map(lambda r: _request(server, r, beam=4), requests))
        settled_counts(server, "nmt", before, len(texts))
        return answers

    answers = first_co_batched(server, "nmt", len(requests), send_all)
    good = [a for i, a in enumerate(answers) if not 4 <= i < 4 + len(bad)]
    assert [a[0] for a in good] == in_process(texts, 4)
    for answer, (_, words) in zip(answers[4 : 4 + len(bad)], bad, strict=True):
        assert isinstance(answer, InferenceServerException), answer
        assert "INVALID_ARG" in str(answer.status()) and words in answer.message(), answer
    with TritonClient(server, timeout=60) as triton:
        assert triton.server_ready()
        assert triton.translate("seven") == ["sept"]


def test_the_shared_repository_serves_the_default_through_the_backend(triton_server) -> None:
    """`make models` builds this default into model_repository/: the session's server answers
    nmt in the ctranslate2 backend's text mode (its statistics count the rows), with no python
    model, no nmt_ct2 and no step models beside it."""
    from tests.support.prerequisites import MODEL_REPOSITORY, require_models

    require_models("nmt")
    backends = model_backends(MODEL_REPOSITORY)
    assert backends["nmt"] == "ctranslate2"
    assert not {"nmt_ct2", "nmt_encoder", "nmt_decoder"} & set(backends)
    url = triton_server.grpc_url
    before = counts_at_rest(url, "nmt")
    with TritonClient(url, timeout=60) as triton:
        assert triton.translate(["seven", "twelve"], beam_size=4) == ["sept", "douze"]
    after = settled_counts(url, "nmt", before, 2)
    assert after[1] - before[1] == 2
