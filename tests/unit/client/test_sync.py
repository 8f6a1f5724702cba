"""TritonClient (triton_kit/client/sync.py) without a server: each method's request, result
and threads.

The tritonclient client is tests/support/recording_client.py's recorder (MOCKED ON PURPOSE: calls
bound to tritonclient's real signatures, replies are real ``InferResult`` objects); the
expected tensors are written out by hand in Triton's wire format.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.support.recording_client import Factory, describe, family_reply, result
from triton_kit.client import (
    TLS,
    ClientClosedError,
    DeadlineExceededError,
    InvalidInputError,
    Retry,
    ServerOverloadedError,
    Timeout,
    TritonClient,
)
from triton_kit.client.options import MODEL_KEYS, ClientOptions
from triton_kit.client.types import Classification, Prediction

URL = "grpc://10.4.5.6:8001"
EMBEDDING = np.array([[0.6, 0.8]], dtype=np.float32)
CLASSES = {
    "CLASS_IDS": np.array([[281, 285, 7]], dtype=np.int64),
    "SCORES": np.array([[0.5, 0.25, 0.125]], dtype=np.float32),
    "LABELS": np.array([[b"tabby", b"Egyptian cat", b"cock"]], dtype=np.object_),
}
BAD = InferenceServerException(msg="bad text", status="StatusCode.INVALID_ARGUMENT")


def make(replies: dict[str, Any], url: str = URL, **options: Any) -> tuple[TritonClient, Factory]:
    factory = Factory(replies)
    options.setdefault("retry", 0)
    return TritonClient(url, client_factory=factory, **options), factory


def text_of(arguments: dict[str, Any]) -> bytes:
    """The TEXT input's bytes as sent (after the 4-byte length)."""
    (text,) = [describe(i) for i in arguments["inputs"] if describe(i)["name"] == "TEXT"]
    return text["raw"][4:]


def embedding_for(arguments: dict[str, Any]) -> Any:
    text = text_of(arguments)
    if text == b"bad":
        raise BAD
    return result("grpc", {"EMBEDDING": np.array([[len(text), 0.5]], dtype=np.float32)})


def test_classify_sends_encoded_bytes_to_resnet50() -> None:
    client, factory = make({"infer": result("grpc", CLASSES)}, timeout=3)
    classes = client.classify(b"\xff\xd8jpeg", top_k=2)
    assert classes == Classification(
        (Prediction(281, "tabby", 0.5), Prediction(285, "Egyptian cat", 0.25))
    )
    ((name, sent),) = factory.calls
    assert name == "infer" and sent["model_name"] == "resnet50"
    assert [describe(i) for i in sent["inputs"]] == [
        {"name": "IMAGE", "datatype": "BYTES", "shape": [1, 1],
         "raw": b"\x06\x00\x00\x00\xff\xd8jpeg"},
    ]  # fmt: skip
    assert [describe(o)["name"] for o in sent["outputs"]] == ["CLASS_IDS", "SCORES", "LABELS"]
    assert 2.9 < sent["client_timeout"] <= 3


def test_classify_sends_decoded_pixels_to_the_uint8_model() -> None:
    client, factory = make({"infer": result("grpc", CLASSES)}, models={"classify_uint8": "pixels"})
    pixels = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    assert client.classify(pixels, top_k=1).class_ids == [281]
    (sent,) = factory.named("infer")
    assert sent["model_name"] == "pixels"
    assert [describe(i) for i in sent["inputs"]] == [
        {"name": "IMAGE_UINT8", "datatype": "UINT8", "shape": [1, 2, 2, 3], "raw": bytes(range(12))}
    ]


def test_classify_batch_one_request_per_image_failures_in_place() -> None:
    def reply(arguments: dict[str, Any]) -> Any:
        if describe(arguments["inputs"][0])["raw"][4:] == b"broken":
            raise InferenceServerException(msg="not an image", status="StatusCode.INVALID_ARGUMENT")
        return result("grpc", CLASSES)

    client, factory = make({"infer": reply}, models={"classify": "r2"})
    images = [b"one", b"broken", b"three"]
    out = client.classify_batch(images, top_k=3, return_exceptions=True)
    assert [type(o).__name__ for o in out] == [
        "Classification",
        "InvalidInputError",
        "Classification",
    ]
    assert out[0].scores == [0.5, 0.25, 0.125]  # type: ignore[union-attr]
    assert {a["model_name"] for a in factory.named("infer")} == {"r2"}
    assert len(factory.named("infer")) == 3
    with pytest.raises(InvalidInputError, match=r"^item 1: .*not an image"):
        client.classify_batch(images)
    assert client.classify_batch([]) == []


def test_embed_one_text_many_texts_and_failures() -> None:
    client, factory = make({"infer": embedding_for}, models={"embed": "e5"})
    assert client.embed("héllo").tolist() == [[6.0, 0.5]]  # 6 UTF-8 bytes
    assert client.embed(["a", b"bcd"]).tolist() == [[1.0, 0.5], [3.0, 0.5]]
    assert [text_of(a) for a in factory.named("infer")] == [b"h\xc3\xa9llo", b"a", b"bcd"]
    assert {a["model_name"] for a in factory.named("infer")} == {"e5"}
    (sent, *_) = factory.named("infer")
    assert [describe(o)["name"] for o in sent["outputs"]] == ["EMBEDDING"]
    mixed = client.embed(["ab", "bad"], return_exceptions=True)
    assert mixed[0].tolist() == [2.0, 0.5] and isinstance(mixed[1], InvalidInputError)
    with pytest.raises(InvalidInputError, match=f"^item 1: {URL}, model 'e5': bad text$"):
        client.embed(["ab", "bad"])
    with pytest.raises(InvalidInputError, match=f"^{URL}, model 'e5': bad text$"):
        client.embed("bad")


def test_an_empty_batch_has_the_models_width_asked_once() -> None:
    metadata = {"outputs": [{"name": "OTHER", "shape": [-1, 3]},
                            {"name": "EMBEDDING", "shape": [-1, 384]}]}  # fmt: skip
    client, factory = make({"get_model_metadata": metadata}, timeout=9)
    first = client.embed([], timeout=4)
    assert first.shape == (0, 384) and first.dtype == np.float32
    assert client.embed([]).shape == (0, 384)
    assert factory.calls == [
        ("get_model_metadata", {"model_name": "bert", "model_version": "", "headers": None,
                                "as_json": True, "client_timeout": 4.0}),
    ]  # fmt: skip
    assert client.embed([], return_exceptions=True) == []


def test_translate_inputs_and_model() -> None:
    words = {"TRANSLATION": np.array([[b"bonjour"]], dtype=np.object_)}
    client, factory = make({"infer": result("grpc", words)})
    assert client.translate("hello", beam_size=2, max_length=10) == ["bonjour"]
    assert client.translate(["a", "b"], model="nmt_rnn") == ["bonjour", "bonjour"]
    first, second, _ = factory.named("infer")
    assert first["model_name"] == "nmt" and second["model_name"] == "nmt_rnn"
    assert [describe(i) for i in first["inputs"]] == [
        {"name": "TEXT", "datatype": "BYTES", "shape": [1, 1], "raw": b"\x05\x00\x00\x00hello"},
        {"name": "BEAM_SIZE", "datatype": "INT32", "shape": [1, 1], "raw": b"\x02\x00\x00\x00"},
        {"name": "MAX_LENGTH", "datatype": "INT32", "shape": [1, 1], "raw": b"\x0a\x00\x00\x00"},
    ]
    assert [describe(i)["name"] for i in second["inputs"]] == ["TEXT", "BEAM_SIZE"]
    assert describe(second["inputs"][1])["raw"] == b"\x04\x00\x00\x00"  # the default beam
    assert [describe(o)["name"] for o in first["outputs"]] == ["TRANSLATION"]


def test_translate_failures() -> None:
    def reply(arguments: dict[str, Any]) -> Any:
        if text_of(arguments) == b"bad":
            raise BAD
        return result("grpc", {"TRANSLATION": np.array([[b"ok"]], dtype=np.object_)})

    client, _ = make({"infer": reply})
    out = client.translate(["x", "bad"], return_exceptions=True)
    assert out[0] == "ok" and isinstance(out[1], InvalidInputError)
    with pytest.raises(InvalidInputError, match=f"^item 1: {URL}, model 'nmt': bad text$"):
        client.translate(["x", "bad"])
    with pytest.raises(InvalidInputError, match=f"^{URL}, model 'nmt': bad text$"):
        client.translate("bad")


def test_generic_infer_passes_every_option() -> None:
    overloaded = InferenceServerException(msg="Exceeds maximum queue size", status="503")
    client, factory = make(
        {"infer": [result("http", {"Y": EMBEDDING}), overloaded, result("http", {"Y": EMBEDDING})]},
        url="http://10.4.5.6:8000",
        headers={"a": "1"},
        retry=Retry(attempts=2, backoff=0.0, max_backoff=0.0),
    )
    out = client.infer(
        "m", {"X": EMBEDDING}, ["Y"], model_version=5, request_id="r", headers={"b": "2"},
        timeout=Timeout(request=2.0, connect=1.0),
    )  # fmt: skip
    assert out["Y"].tolist() == EMBEDDING.tolist()
    (sent,) = factory.named("infer")
    assert sent["model_version"] == "5" and sent["request_id"] == "r"
    assert sent["headers"] == {"a": "1", "b": "2"}
    assert 1_900_000 < sent["timeout"] <= 2_000_000
    assert factory.specs[0].network_timeout == 2.0
    with pytest.raises(ServerOverloadedError):
        client.infer("m", {"X": EMBEDDING}, idempotent=False)
    assert len(factory.named("infer")) == 2  # not retried
    client.infer("m", {"X": EMBEDDING})
    assert factory.named("infer")[-1]["outputs"] is None  # none named: every output


def test_probes_default_to_the_clients_timeout_and_versions() -> None:
    replies = {"is_server_ready": True, "is_model_ready": True, "get_model_metadata": {"x": 1}}
    client, factory = make(replies, timeout=7, versions={"bert": 2})
    assert client.server_ready() is True
    assert client.model_ready("bert") is True
    assert client.model_ready("bert", version=3, timeout=1.5) is True
    assert client.model_metadata("nmt") == {"x": 1}
    assert client.model_metadata("bert", version="4", timeout=2) == {"x": 1}
    sent = [(name, a.get("model_name"), a.get("model_version"), a["client_timeout"])
            for name, a in factory.calls]  # fmt: skip
    assert sent == [
        ("is_server_ready", None, None, 7.0),
        ("is_model_ready", "bert", "2", 7.0),
        ("is_model_ready", "bert", "3", 1.5),
        ("get_model_metadata", "nmt", "", 7.0),
        ("get_model_metadata", "bert", "4", 2),
    ]


def test_wait_until_ready_polls_each_quarter_second() -> None:
    client, factory = make({"is_server_ready": [False, False, True], "is_model_ready": True})
    started = time.monotonic()
    client.wait_until_ready(timeout=60, models=["bert", "nmt"])
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 1.5
    assert factory.methods() == ["is_server_ready"] * 3 + ["is_model_ready"] * 2
    probes = [a["client_timeout"] for _, a in factory.calls]
    assert probes == [5.0] * 5  # each probe waits at most 5 s
    assert [a["model_name"] for a in factory.named("is_model_ready")] == ["bert", "nmt"]


def test_wait_until_ready_gives_up_at_its_limit() -> None:
    client, factory = make({"is_server_ready": True, "is_model_ready": False})
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError) as caught:
        client.wait_until_ready(timeout=0.6, models=["bert"])
    assert 0.6 <= time.monotonic() - started < 1.2
    assert str(caught.value) == f"{URL} not ready within 0.6 s"
    probes = [a["client_timeout"] for _, a in factory.calls]
    assert 3 <= len(factory.named("is_model_ready")) <= 4
    assert 0.55 < probes[0] <= 0.6 and all(p < 0.6 for p in probes[1:])


def test_each_thread_has_its_own_transport() -> None:
    client, factory = make({"infer": embedding_for})
    client.embed("a")
    client.embed("b")
    assert len(factory.specs) == 1
    worker = threading.Thread(target=client.embed, args=("c",))
    worker.start()
    worker.join()
    assert len(factory.specs) == 2
    client.close()
    assert factory.methods().count("close") == 2  # both threads' connections


def test_batches_run_on_max_concurrency_named_threads() -> None:
    barrier = threading.Barrier(3, timeout=5)
    names: list[str] = []
    in_flight = [0, 0]  # now, most
    lock = threading.Lock()
    batch = [True]

    def reply(arguments: dict[str, Any]) -> Any:
        with lock:
            names.append(threading.current_thread().name)
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
        if batch:
            barrier.wait()  # three at once, or a BrokenBarrierError
        time.sleep(0.02)
        with lock:
            in_flight[0] -= 1
        return embedding_for(arguments)

    client, _ = make({"infer": reply}, max_concurrency=3)
    out = client.embed(["a", "bb", "ccc", "dddd", "eeeee", "ffffff"])
    assert out[:, 0].tolist() == [1, 2, 3, 4, 5, 6]  # input order
    assert in_flight[1] == 3
    assert all(name.startswith("triton_") for name in names) and len(set(names)) == 3
    names.clear()
    batch.clear()
    client.embed(["x"])  # one item: on the caller's thread
    assert names == [threading.current_thread().name]
    client.close()


def test_close_is_final_and_a_context_manager_closes() -> None:
    client, factory = make({"infer": embedding_for, "is_server_ready": True})
    client.embed(["a", "b"])
    client.close()
    assert client.closed is True and client._pool is None
    assert factory.methods().count("close") == len(factory.specs) >= 1  # every thread's
    for call in (lambda: client.embed("x"), client.server_ready, lambda: client.embed(["a", "b"])):
        with pytest.raises(ClientClosedError):
            call()
    with make({"infer": embedding_for})[0] as other:
        other.embed("a")
    assert other.closed is True


def test_per_call_timeouts_reach_every_method() -> None:
    client, factory = make({"infer": family_reply(CLASSES)}, timeout=50)
    client.classify(b"a", timeout=1)
    client.classify_batch([b"a", b"b"], timeout=2)
    client.embed("a", timeout=3)
    client.translate("a", timeout=4)
    budgets = sorted(round(a["client_timeout"]) for a in factory.named("infer"))
    assert budgets == [1, 2, 2, 3, 4]


def test_batch_options_and_defaults() -> None:
    client, _ = make({"infer": result("grpc", CLASSES)})
    (two,) = client.classify_batch([b"img"], top_k=2)
    assert two.class_ids == [281, 285]  # type: ignore[union-attr]
    names: list[str] = []

    def reply(arguments: dict[str, Any]) -> Any:
        names.append(threading.current_thread().name)
        return embedding_for(arguments)

    pair, _ = make({"infer": reply})
    pair.embed(["a", "b"])  # two items already go to the pool
    assert len(names) == 2 and all(name.startswith("triton_") for name in names)
    pair.close()


def test_generic_infer_is_retried_by_default_and_metadata_uses_pinned_versions() -> None:
    overloaded = InferenceServerException(msg="Exceeds maximum queue size", status="503")
    client, factory = make(
        {"infer": [overloaded, result("grpc", {"Y": EMBEDDING})], "get_model_metadata": {}},
        retry=Retry(attempts=2, backoff=0.0, max_backoff=0.0),
        versions={"bert": 2},
    )
    assert client.infer("m", {"X": EMBEDDING}, ["Y"])["Y"].tolist() == EMBEDDING.tolist()
    assert len(factory.named("infer")) == 2
    client.model_metadata("bert")
    assert factory.named("get_model_metadata")[0]["model_version"] == "2"


def test_wait_until_ready_never_sleeps_past_its_limit() -> None:
    client, _ = make({"is_server_ready": False})
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.wait_until_ready(timeout=0.05)
    assert time.monotonic() - started < 0.2  # not a whole 0.25 s poll interval


def test_close_waits_for_the_batch_in_flight() -> None:
    gate, started = threading.Event(), threading.Event()

    def reply(arguments: dict[str, Any]) -> Any:
        started.set()
        gate.wait(5)
        return embedding_for(arguments)

    client, _ = make({"infer": reply})
    batch = threading.Thread(
        target=client.embed, args=(["a", "b"],), kwargs={"return_exceptions": True}
    )
    batch.start()
    assert started.wait(5)
    closer = threading.Thread(target=client.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close() returned with calls still in flight"
    gate.set()
    closer.join(5)
    batch.join(5)
    assert not closer.is_alive() and not batch.is_alive()


def check_every_option_reaches_the_client(cls: type) -> None:
    factory = Factory()
    tls = TLS(ca_file="ca.pem")
    client = cls(
        "https://h", 3, max_concurrency=4, models={"embed": "e5"}, versions={"m": 2},
        headers={"a": "b"}, retry=5, tls=tls, compression="deflate", shared_memory="system",
        shared_memory_threshold=9, cuda_device=1, api_key="k", client_factory=factory,
    )  # fmt: skip
    assert client.options == ClientOptions(
        timeout=Timeout(request=3.0, connect=10.0),
        max_concurrency=4,
        models={"classify": "resnet50", "embed": "e5", "translate": "nmt",
                "classify_uint8": "resnet50_uint8"},
        versions={"m": "2"},
        headers={"a": "b"},
        retry=Retry(attempts=6),
        tls=tls,
        compression="deflate",
        shared_memory="system",
        shared_memory_threshold=9,
        cuda_device=1,
        api_key="k",
    )  # fmt: skip
    assert client.client_factory is factory
    assert cls("grpc://h").options == ClientOptions(models=MODEL_KEYS)
    assert cls("grpc://h").options.cuda_device == 0


def test_every_option_reaches_the_client() -> None:
    check_every_option_reaches_the_client(TritonClient)
