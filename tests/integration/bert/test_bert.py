"""The served ``bert`` ensemble against sentence-transformers in-process on the same checkpoint.

Bad input (documented behaviour, checked here): empty, whitespace-only, invalid
UTF-8 and over-long (> max_text_bytes, 64 KiB by default) texts each get
INVALID_ARG naming the problem; other requests are served as usual.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.batching import first_co_batched
from tests.support.prerequisites import require_models
from triton_kit.client import AsyncTritonClient, InvalidInputError, TritonClient

COSINE_MIN = 0.9999
LONG_TEXT = " ".join(f"token{i} and some filler words" for i in range(200))  # > 256 tokens

SENTENCES = [
    "Hello",
    "cat",
    "?!",
    "...",
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the stage while the crowd sings along.",
    "東京は日本の首都です。",
    "我喜欢在周末去公园散步。",
    "서울은 한국의 수도입니다.",
    "Москва — столица России.",
    "القاهرة هي عاصمة مصر.",
    "नमस्ते, आप कैसे हैं?",
    "Ελπίζω να έχετε μια όμορφη μέρα.",
    "עברית נכתבת מימין לשמאל.",
    "ok 👍",
    "🎉🎉🎉",
    "I ❤️ New York 🗽 and pizza 🍕",
    "Crème brûlée, jalapeño, naïve café, Ångström.",
    "SHOUTING IN ALL CAPS IS STILL THE SAME WORDS",
    "Prices rose 3.2% in March 2024, the fastest pace since 2019.",
    "https://example.com/path?query=1&lang=en",
    "def add(a: int, b: int) -> int: return a + b",
    "tabs\tand\nnew\nlines   and    spaces",
    "zero\u200bwidth\u200bspaces",
    "supercalifragilisticexpialidocious",
    "a" * 300,
    "How do I reset my password if I no longer have access to my email account?",
    "The mitochondria is the powerhouse of the cell, producing ATP through respiration.",
    "Der Zug nach Berlin hat heute leider zwanzig Minuten Verspätung.",
    "Il pleut depuis ce matin, mais le marché reste ouvert jusqu'à midi.",
    "word " * 600,
    LONG_TEXT,
    " leading and trailing spaces ",
    "x",
]


def checkpoint_dir(model_repository: Path) -> Path:
    """The checkpoint that bert_model was exported from, as recorded in its build.json.

    Served files record only a path's last two parts (no build-machine layout), so the
    default checkpoint shipped in a package is recognised by them."""
    from triton_kit.build_engines.families.bert import default_checkpoint

    source = json.loads((model_repository / "bert_model" / "build.json").read_text())
    assert source["random_weights"] == "false", "model_repository's bert has random weights"
    recorded = source["source"].removeprefix("checkpoint ")
    default = default_checkpoint()
    if default is not None and recorded == "/".join(default.parts[-2:]):
        return default
    return Path(recorded)


@pytest.fixture(scope="module", autouse=True)
def _models() -> None:
    require_models("bert", "bert_preprocess", "bert_model")


@pytest.fixture(scope="module")
def reference(model_repository: Path) -> Any:
    """sentence-transformers on the same checkpoint: the independent reference."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(checkpoint_dir(model_repository)), device="cpu")


def expected(reference: Any, texts: list[str]) -> np.ndarray:
    return reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)


def assert_matches(served: np.ndarray, wanted: np.ndarray, texts: list[str]) -> None:
    assert served.shape == wanted.shape
    assert served.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(served * wanted, axis=1) / np.linalg.norm(wanted, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= COSINE_MIN, f"cosine {cosines[worst]:.6f} for {texts[worst][:60]!r}"


def test_sentences_are_varied_enough() -> None:
    assert len(SENTENCES) >= 30
    assert len(set(SENTENCES)) == len(SENTENCES)


def test_embeddings_match_sentence_transformers(
    triton_client: TritonClient, reference: Any
) -> None:
    assert_matches(triton_client.embed(SENTENCES), expected(reference, SENTENCES), SENTENCES)


async def test_async_embeddings_match_sentence_transformers(
    async_triton_client: AsyncTritonClient, reference: Any
) -> None:
    served = await async_triton_client.embed(SENTENCES)
    assert_matches(served, expected(reference, SENTENCES), SENTENCES)


def test_ensemble_through_the_onnxruntime_backend_matches(server_url: str, reference: Any) -> None:
    """``bert_ensemble`` runs ``bert_model`` in Triton's own onnxruntime backend, as ``bert``
    does through BLS: the same embeddings, fused graph (the build's default) or not."""
    require_models("bert_ensemble")
    with TritonClient(server_url, timeout=120, models={"embed": "bert_ensemble"}) as client:
        served = client.embed(SENTENCES)
    assert_matches(served, expected(reference, SENTENCES), SENTENCES)


def test_single_text_gives_one_row(triton_client: TritonClient, reference: Any) -> None:
    served = triton_client.embed("Hello")
    assert served.shape == (1, 384)
    assert_matches(served, expected(reference, ["Hello"]), ["Hello"])


def test_mixed_length_batch_rows_equal_single_requests(triton_client: TritonClient) -> None:
    """Batched with others (possibly padded to a larger bucket) changes no row."""
    texts = [*SENTENCES[:12], LONG_TEXT, "x", "word " * 40]
    batched = triton_client.embed(texts)
    singles = np.concatenate([triton_client.embed(text) for text in texts])
    np.testing.assert_allclose(batched, singles, atol=2e-5, rtol=0)


def test_similar_sentences_are_closer_than_unrelated(triton_client: TritonClient) -> None:
    cat, kitten, tax = triton_client.embed(
        ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly tax filing rules"]
    )
    assert float(cat @ kitten) > float(cat @ tax) + 0.3


BAD_TEXTS = {
    "empty": ("", "TEXT is empty"),
    "whitespace": (" \t\n  ", "TEXT is whitespace only"),
    "invalid-utf8": (b"caf\xc3(", "not valid UTF-8: byte 3"),
    "one-megabyte": ("a" * 1_000_000, "TEXT is 1000000 bytes; the limit is 65536 bytes"),
}


@pytest.mark.parametrize("name", list(BAD_TEXTS))
def test_bad_text_is_rejected_with_reason(triton_client: TritonClient, name: str) -> None:
    text, message = BAD_TEXTS[name]
    with pytest.raises(InvalidInputError, match=message):
        triton_client.embed(text)
    assert triton_client.server_ready()


def test_bad_texts_fail_alone_in_a_concurrent_batch(
    triton_client: TritonClient, triton_server: Any, reference: Any
) -> None:
    """Good and bad requests arrive together; only the bad ones fail."""
    good = SENTENCES[4:14]
    bad = [text for text, _ in BAD_TEXTS.values()]
    pairs = zip(good, bad * 3, strict=False)
    items: list[str | bytes] = [value for pair in pairs for value in pair]

    def one(text: str | bytes) -> np.ndarray | Exception:
        try:
            return triton_client.embed(text)[0]
        except InvalidInputError as exc:
            return exc

    def send_all() -> list:
        with ThreadPoolExecutor(len(items)) as pool:
            return list(pool.map(one, items))

    results = first_co_batched(triton_server.grpc_url, "bert", len(items), send_all)
    served = [r for r in results if not isinstance(r, Exception)]
    failed = [r for r in results if isinstance(r, Exception)]
    assert len(failed) == len(items) - len(good)
    assert all("TEXT is" in str(exc) for exc in failed)
    assert_matches(np.stack(served), expected(reference, good), good)
    assert triton_client.server_ready()


def test_batch_error_names_the_bad_item(triton_client: TritonClient) -> None:
    with pytest.raises(InvalidInputError, match="item 2"):
        triton_client.embed(["fine", "also fine", ""])
