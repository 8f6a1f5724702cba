"""AsyncTritonClient and AsyncTransport without a server: requests, results, tasks, close().

The tritonclient asyncio client is tests/support/recording_client.py's recorder (MOCKED ON
PURPOSE: calls bound to the real ``tritonclient.grpc.aio``/``http.aio`` signatures,
replies are real ``InferResult`` objects); expected tensors are written out by hand.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.support.recording_client import Factory, describe, family_reply, result
from triton_kit.client import (
    AsyncTritonClient,
    ClientClosedError,
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    Retry,
    ServerConnectionError,
    ServerOverloadedError,
    Timeout,
)
from triton_kit.client.codecs import Call
from triton_kit.client.options import ClientOptions
from triton_kit.client.transport import AsyncTransport, ClientSpec, Endpoint, Request
from triton_kit.client.types import Classification, Prediction

URL = "grpc://10.7.7.7:8001"
HTTP_URL = "http://10.7.7.7:8000"
X = np.array([[1.5, 2.0]], dtype=np.float32)
X_BYTES = b"\x00\x00\xc0\x3f\x00\x00\x00\x40"
CLASSES = {
    "CLASS_IDS": np.array([[281, 285]], dtype=np.int64),
    "SCORES": np.array([[0.75, 0.125]], dtype=np.float32),
    "LABELS": np.array([[b"tabby", b"Egyptian cat"]], dtype=np.object_),
}
BAD = InferenceServerException(msg="bad text", status="StatusCode.INVALID_ARGUMENT")
REFUSED = InferenceServerException(
    msg="failed to connect to all addresses; last error: UNKNOWN: Connection refused",
    status="StatusCode.UNAVAILABLE",
)


def make(
    replies: dict[str, Any], url: str = URL, **options: Any
) -> tuple[AsyncTritonClient, Factory]:
    factory = Factory(replies)
    options.setdefault("retry", 0)
    return AsyncTritonClient(url, client_factory=factory, **options), factory


def text_of(arguments: dict[str, Any]) -> bytes:
    return describe(arguments["inputs"][0])["raw"][4:]


def embedding_for(arguments: dict[str, Any]) -> Any:
    text = text_of(arguments)
    if text == b"bad":
        raise BAD
    return result("grpc", {"EMBEDDING": np.array([[len(text), 0.5]], dtype=np.float32)})


# -- the client's methods ----------------------------------------------------------------
async def test_classify_encoded_and_decoded() -> None:
    client, factory = make({"infer": result("grpc", CLASSES)}, models={"classify": "r"})
    assert await client.classify(b"img", top_k=1) == Classification(
        (Prediction(281, "tabby", 0.75),)
    )
    pixels = np.full((1, 1, 3), 9, dtype=np.uint8)
    assert (await client.classify(pixels, top_k=2)).scores == [0.75, 0.125]
    encoded, decoded = factory.named("infer")
    assert encoded["model_name"] == "r" and decoded["model_name"] == "resnet50_uint8"
    assert [describe(i) for i in encoded["inputs"]] == [
        {"name": "IMAGE", "datatype": "BYTES", "shape": [1, 1], "raw": b"\x03\x00\x00\x00img"}
    ]
    assert [describe(i) for i in decoded["inputs"]] == [
        {"name": "IMAGE_UINT8", "datatype": "UINT8", "shape": [1, 1, 1, 3], "raw": b"\t\t\t"}
    ]
    assert [describe(o)["name"] for o in encoded["outputs"]] == ["CLASS_IDS", "SCORES", "LABELS"]
    await client.close()


async def test_classify_batch_failures_in_place_or_raised() -> None:
    def reply(arguments: dict[str, Any]) -> Any:
        if text_of(arguments) == b"bad":
            raise InferenceServerException(msg="no image", status="StatusCode.INVALID_ARGUMENT")
        return result("grpc", CLASSES)

    client, factory = make({"infer": reply})
    out = await client.classify_batch([b"a", b"bad"], top_k=2, return_exceptions=True)
    assert isinstance(out[0], Classification) and isinstance(out[1], InvalidInputError)
    assert out[0].class_ids == [281, 285]
    with pytest.raises(InvalidInputError, match=f"^item 1: {URL}, model 'resnet50': no image$"):
        await client.classify_batch([b"a", b"bad"], top_k=2)
    assert len(factory.named("infer")) == 4


async def test_embed_single_batch_and_failures() -> None:
    client, factory = make({"infer": embedding_for}, models={"embed": "e5"}, timeout=6)
    assert (await client.embed("abc")).tolist() == [[3.0, 0.5]]
    assert (await client.embed(["a", "bb"])).tolist() == [[1.0, 0.5], [2.0, 0.5]]
    assert {a["model_name"] for a in factory.named("infer")} == {"e5"}
    assert [describe(o)["name"] for o in factory.named("infer")[0]["outputs"]] == ["EMBEDDING"]
    assert 5.9 < factory.named("infer")[0]["client_timeout"] <= 6
    mixed = await client.embed(["ab", "bad"], return_exceptions=True)
    assert mixed[0].tolist() == [2.0, 0.5] and isinstance(mixed[1], InvalidInputError)
    with pytest.raises(InvalidInputError, match=f"^item 1: {URL}, model 'e5': bad text$"):
        await client.embed(["ab", "bad"])
    with pytest.raises(InvalidInputError, match=f"^{URL}, model 'e5': bad text$"):
        await client.embed("bad")


async def test_an_empty_batch_has_the_models_width_asked_once() -> None:
    metadata = {"outputs": [{"name": "EMBEDDING", "shape": [-1, 16]}]}
    client, factory = make({"get_model_metadata": metadata}, timeout=9)
    empty = await client.embed([], timeout=3)
    assert empty.shape == (0, 16) and empty.dtype == np.float32
    assert (await client.embed([])).shape == (0, 16)
    assert factory.calls == [
        ("get_model_metadata", {"model_name": "bert", "model_version": "", "headers": None,
                                "as_json": True, "client_timeout": 3.0}),
    ]  # fmt: skip
    assert await client.embed([], return_exceptions=True) == []


async def test_translate_inputs_model_and_failures() -> None:
    def reply(arguments: dict[str, Any]) -> Any:
        if text_of(arguments) == b"bad":
            raise BAD
        return result("grpc", {"TRANSLATION": np.array([[b"salut"]], dtype=np.object_)})

    client, factory = make({"infer": reply})
    assert await client.translate("hi", beam_size=3, max_length=7) == ["salut"]
    assert await client.translate(["a", "b"], model="nmt_rnn") == ["salut", "salut"]
    first, second, _ = factory.named("infer")
    assert first["model_name"] == "nmt" and second["model_name"] == "nmt_rnn"
    assert [describe(i) for i in first["inputs"]] == [
        {"name": "TEXT", "datatype": "BYTES", "shape": [1, 1], "raw": b"\x02\x00\x00\x00hi"},
        {"name": "BEAM_SIZE", "datatype": "INT32", "shape": [1, 1], "raw": b"\x03\x00\x00\x00"},
        {"name": "MAX_LENGTH", "datatype": "INT32", "shape": [1, 1], "raw": b"\x07\x00\x00\x00"},
    ]
    assert [describe(o)["name"] for o in first["outputs"]] == ["TRANSLATION"]
    out = await client.translate(["x", "bad"], return_exceptions=True)
    assert out[0] == "salut" and isinstance(out[1], InvalidInputError)
    with pytest.raises(InvalidInputError, match=f"^item 1: {URL}, model 'nmt': bad text$"):
        await client.translate(["x", "bad"])
    with pytest.raises(InvalidInputError, match=f"^{URL}, model 'nmt': bad text$"):
        await client.translate("bad")


async def test_generic_infer_passes_every_option() -> None:
    overloaded = InferenceServerException(msg="Exceeds maximum queue size", status="503")
    client, factory = make(
        {"infer": [result("http", {"Y": X}), overloaded, result("http", {"Y": X})]},
        url=HTTP_URL,
        headers={"a": "1"},
        retry=Retry(attempts=2, backoff=0.0, max_backoff=0.0),
        compression="gzip",
    )
    out = await client.infer(
        "m", {"X": X}, ["Y"], model_version=5, request_id="r", headers={"b": "2"},
        timeout=Timeout(request=2.0, connect=1.0),
    )  # fmt: skip
    assert out["Y"].tolist() == [[1.5, 2.0]]
    (sent,) = factory.named("infer")
    assert sent["model_version"] == "5" and sent["request_id"] == "r"
    assert sent["headers"] == {"a": "1", "b": "2"}
    assert sent["request_compression_algorithm"] == "gzip"
    assert 1_900_000 < sent["timeout"] <= 2_000_000
    assert [describe(i)["raw"] for i in sent["inputs"]] == [X_BYTES]
    with pytest.raises(ServerOverloadedError) as caught:
        await client.infer("m", {"X": X}, idempotent=False, request_id="q")
    assert caught.value.request_id == "q"
    assert len(factory.named("infer")) == 2  # not retried
    await client.infer("m", {"X": X})
    assert factory.named("infer")[-1]["outputs"] is None


async def test_tasks_in_flight_never_exceed_max_concurrency() -> None:
    in_flight = [0, 0]

    async def slow(arguments: dict[str, Any]) -> Any:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(0.02)
        in_flight[0] -= 1
        return embedding_for(arguments)

    class Slow(Factory):
        def __call__(self, spec: ClientSpec) -> Any:
            client = super().__call__(spec)

            async def infer(model_name: str, inputs: list, **kwargs: Any) -> Any:
                return await slow({"inputs": inputs})

            client.__dict__["infer"] = infer
            return client

    factory = Slow()
    client = AsyncTritonClient(URL, max_concurrency=2, client_factory=factory)
    out = await client.embed(["a", "bb", "ccc", "dddd", "eeeee"])
    assert out[:, 0].tolist() == [1, 2, 3, 4, 5]
    assert in_flight[1] == 2
    assert len(factory.specs) == 1  # one connection for every task


async def test_probes_default_to_the_clients_timeout_and_versions() -> None:
    replies = {"is_server_ready": 1, "is_model_ready": 0, "get_model_metadata": {"x": 1}}
    client, factory = make(replies, timeout=7, versions={"bert": 2}, headers={"h": "v"})
    assert await client.server_ready() is True
    assert await client.model_ready("bert") is False
    assert await client.model_ready("bert", version=3, timeout=1.5) is False
    assert await client.model_metadata("nmt") == {"x": 1}
    assert await client.model_metadata("bert", version="4", timeout=2) == {"x": 1}
    assert factory.calls == [
        ("is_server_ready", {"headers": {"h": "v"}, "client_timeout": 7.0}),
        ("is_model_ready", {"model_name": "bert", "model_version": "2", "headers": {"h": "v"},
                            "client_timeout": 7.0}),
        ("is_model_ready", {"model_name": "bert", "model_version": "3", "headers": {"h": "v"},
                            "client_timeout": 1.5}),
        ("get_model_metadata", {"model_name": "nmt", "model_version": "", "as_json": True,
                                "headers": {"h": "v"}, "client_timeout": 7.0}),
        ("get_model_metadata", {"model_name": "bert", "model_version": "4", "as_json": True,
                                "headers": {"h": "v"}, "client_timeout": 2}),
    ]  # fmt: skip
    assert factory.specs == [ClientSpec(client.endpoint, client.options, aio=True,
                                        network_timeout=7.0)]  # fmt: skip


async def test_http_probes_send_no_grpc_arguments() -> None:
    replies = {"is_server_ready": True, "is_model_ready": True, "get_model_metadata": {}}
    client, factory = make(replies, url=HTTP_URL)
    await client.server_ready(timeout=None)
    await client.model_ready("m", timeout=2)
    await client.model_metadata("m", timeout=2)
    assert factory.calls == [
        ("is_server_ready", {"headers": None}),
        ("is_model_ready", {"model_name": "m", "model_version": "", "headers": None}),
        ("get_model_metadata", {"model_name": "m", "model_version": "", "headers": None}),
    ]


async def test_probe_failures() -> None:
    unknown = InferenceServerException(msg="Request for unknown model: 'no' is not found",
                                       status="StatusCode.NOT_FOUND")  # fmt: skip
    dns = InferenceServerException(
        msg="DNS resolution failed for x", status="StatusCode.UNAVAILABLE"
    )
    client, _ = make({"is_server_ready": [REFUSED, dns, unknown], "is_model_ready": unknown,
                      "get_model_metadata": unknown})  # fmt: skip
    assert await client.server_ready(timeout=1) is False
    with pytest.raises(ServerConnectionError) as caught:
        await client.server_ready(timeout=1)
    assert caught.value.reason == "dns" and caught.value.__cause__ is dns
    with pytest.raises(ModelUnavailableError):
        await client.server_ready(timeout=1)
    assert await client.model_ready("no", timeout=1) is False
    with pytest.raises(ModelUnavailableError) as missing:
        await client.model_metadata("no", timeout=1)
    assert missing.value.model == "no" and missing.value.__cause__ is unknown


async def test_a_probe_that_hangs_ends_at_its_timeout() -> None:
    async def hang(arguments: dict[str, Any]) -> bool:
        await asyncio.sleep(5)
        return True

    class Hanging(Factory):
        def __call__(self, spec: ClientSpec) -> Any:
            client = super().__call__(spec)

            async def is_server_ready(**kwargs: Any) -> bool:
                return await hang(kwargs)

            client.__dict__["is_server_ready"] = is_server_ready
            return client

    client = AsyncTritonClient(HTTP_URL, client_factory=Hanging())
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        await client.server_ready(timeout=0.2)
    assert time.monotonic() - started < 1.0


async def test_wait_until_ready_polls_each_quarter_second() -> None:
    client, factory = make({"is_server_ready": [False, False, True], "is_model_ready": True})
    started = time.monotonic()
    await client.wait_until_ready(timeout=60, models=["bert", "nmt"])
    assert 0.5 <= time.monotonic() - started < 1.5
    assert factory.methods() == ["is_server_ready"] * 3 + ["is_model_ready"] * 2
    assert [a["client_timeout"] for _, a in factory.calls] == [5.0] * 5
    assert [a["model_name"] for a in factory.named("is_model_ready")] == ["bert", "nmt"]


async def test_wait_until_ready_gives_up_at_its_limit() -> None:
    client, factory = make({"is_server_ready": True, "is_model_ready": False})
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError) as caught:
        await client.wait_until_ready(timeout=0.6, models=["bert"])
    assert 0.6 <= time.monotonic() - started < 1.2
    assert str(caught.value) == f"{URL} not ready within 0.6 s"
    probes = [a["client_timeout"] for _, a in factory.calls]
    assert 3 <= len(factory.named("is_model_ready")) <= 4
    assert 0.55 < probes[0] <= 0.6 and all(p < 0.6 for p in probes[1:])


async def test_close_is_final_and_a_context_manager_closes() -> None:
    client, factory = make({"infer": embedding_for, "is_server_ready": True})
    await client.embed("a")
    await client.close()
    assert client.closed is True
    assert factory.methods() == ["infer", "close"]
    for call in (client.embed("x"), client.server_ready(), client.model_ready("m"),
                 client.model_metadata("m"), client.embed(["a", "b"])):  # fmt: skip
        with pytest.raises(ClientClosedError):
            await call
    async with make({"infer": embedding_for})[0] as other:
        await other.embed("a")
    assert other.closed is True


# -- AsyncTransport -----------------------------------------------------------------------
def transport(protocol: str, factory: Factory, **options: Any) -> AsyncTransport:
    options.setdefault("retry", Retry(attempts=3, backoff=0.0, max_backoff=0.0))
    url = URL if protocol == "grpc" else HTTP_URL
    return AsyncTransport(Endpoint.parse(url), ClientOptions(**options), factory)


def request(call: Call, seconds: float | None = 5.0) -> Request:
    return Request(call, Timeout(request=seconds))


async def test_a_connection_failure_reconnects_before_the_retry() -> None:
    factory = Factory({"infer": [REFUSED, result("grpc", {"Y": X})]})
    t = transport("grpc", factory)
    assert (await t.infer(request(Call("m", {"X": X}, ("Y",)))))["Y"].tolist() == [[1.5, 2.0]]
    assert factory.methods() == ["infer", "close", "infer"]
    assert len(factory.specs) == 2 and factory.clients[0] is not factory.clients[1]


async def test_overload_is_retried_on_the_same_connection() -> None:
    overloaded = InferenceServerException(msg="Exceeds maximum queue size", status="503")
    factory = Factory({"infer": [overloaded, result("http", {"Y": X})]})
    t = transport("http", factory)
    await t.infer(request(Call("m", {}, ("Y",))))
    assert factory.methods() == ["infer", "infer"] and len(factory.specs) == 1


async def test_an_infer_that_hangs_ends_at_the_deadline() -> None:
    class Hanging(Factory):
        def __call__(self, spec: ClientSpec) -> Any:
            client = super().__call__(spec)

            async def infer(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(5)

            client.__dict__["infer"] = infer
            return client

    t = transport("http", Hanging(), retry=Retry.off())
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        await t.infer(request(Call("m", {}, ("Y",)), 0.2))
    assert time.monotonic() - started < 1.0


async def test_no_outputs_named_returns_every_output() -> None:
    factory = Factory({"infer": result("http", {"A": X, "B": X * 2})})
    out = await transport("http", factory).infer(request(Call("m", {}, ())))
    assert list(out) == ["A", "B"] and out["B"].tolist() == [[3.0, 4.0]]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
async def test_shared_memory_registers_reuses_and_releases(protocol: str) -> None:
    factory = Factory({"infer": result(protocol, {"Y": X})})
    t = transport(protocol, factory, shared_memory="system", shared_memory_threshold=8,
                  headers={"k": "v"})  # fmt: skip
    call = Call("m", {"X": X}, ("Y",))
    await t.infer(request(call))
    await t.infer(request(call))
    (register,) = factory.named("register_system_shared_memory")
    name = register["name"]
    assert register == {"name": name, "key": f"/{name}", "byte_size": 8, "headers": {"k": "v"}}
    with open(f"/dev/shm/{name}", "rb") as region:
        assert region.read() == X_BYTES
    for sent in factory.named("infer"):
        assert describe(sent["inputs"][0])["parameters"] == {
            "shared_memory_region": name,
            "shared_memory_byte_size": 8,
        }
    await t.close()
    assert factory.methods()[-2:] == ["unregister_system_shared_memory", "close"]
    assert factory.named("unregister_system_shared_memory") == [
        {"name": name, "headers": {"k": "v"}}
    ]
    assert not os.path.exists(f"/dev/shm/{name}")
    await t.close()  # nothing left
    assert factory.methods().count("close") == 1


async def test_close_waits_out_a_region_still_in_use() -> None:
    in_use = InferenceServerException(
        msg="Cannot unregister shared memory region 'r', it is currently in use.",
        status="StatusCode.INTERNAL",
    )
    factory = Factory(
        {
            "infer": result("grpc", {"Y": X}),
            "unregister_system_shared_memory": [in_use, in_use, None],
        }
    )
    t = transport("grpc", factory, shared_memory="system", shared_memory_threshold=1)
    await t.infer(request(Call("m", {"X": X}, ("Y",))))
    started = time.monotonic()
    await t.close()
    assert 0.015 <= time.monotonic() - started < 0.5  # 0, then 5 ms, then 10 ms
    assert factory.methods().count("unregister_system_shared_memory") == 3


async def test_close_gives_up_on_other_unregister_failures_and_warns_when_never_let_go() -> None:
    gone = InferenceServerException(msg="failed to connect", status="StatusCode.UNAVAILABLE")
    in_use = InferenceServerException(msg="it is currently in use", status="StatusCode.INTERNAL")
    # "in use" every time: 0, 5, 10, 20 ... 640 ms (1.275 s); 1.28 s more would pass 2 s
    for refusal, attempts in ((gone, 1), (in_use, 9)):
        factory = Factory({"infer": result("grpc", {"Y": X}),
                           "unregister_system_shared_memory": refusal})  # fmt: skip
        t = transport("grpc", factory, shared_memory="system", shared_memory_threshold=1)
        await t.infer(request(Call("m", {"X": X}, ("Y",))))
        name = factory.named("register_system_shared_memory")[0]["name"]
        if refusal is gone:
            await t.close()
        else:
            with pytest.warns(ResourceWarning, match=f"'{name}' is still registered"):
                await t.close()
        assert factory.methods().count("unregister_system_shared_memory") == attempts
        assert not os.path.exists(f"/dev/shm/{name}")


async def test_close_after_a_lost_connection_still_unregisters() -> None:
    """As the sync twin: a call that dropped the connection leaves its region registered on
    the server, so close() dials again to unregister it (the server may be back)."""
    factory = Factory({"infer": REFUSED})
    t = transport("grpc", factory, shared_memory="system", shared_memory_threshold=1,
                  retry=Retry.off())  # fmt: skip
    with pytest.raises(ServerConnectionError):
        await t.infer(request(Call("m", {"X": X}, ("Y",))))
    (register,) = factory.named("register_system_shared_memory")
    assert factory.methods() == ["register_system_shared_memory", "infer", "close"]
    await t.close()
    assert factory.methods() == [
        "register_system_shared_memory", "infer", "close",
        "unregister_system_shared_memory", "close",
    ]  # fmt: skip
    assert factory.named("unregister_system_shared_memory") == [
        {"name": register["name"], "headers": None}
    ]
    assert len(factory.specs) == 2
    assert not os.path.exists(f"/dev/shm/{register['name']}")


async def test_close_destroys_the_regions_even_if_no_connection_can_be_made() -> None:
    recorder = Factory({"infer": REFUSED})

    def factory(spec: ClientSpec) -> Any:
        if recorder.calls:
            raise OSError("no more connections")
        return recorder(spec)

    t = transport("grpc", recorder, shared_memory="system", shared_memory_threshold=1,
                  retry=Retry.off())  # fmt: skip
    t.factory = factory
    with pytest.raises(ServerConnectionError):
        await t.infer(request(Call("m", {"X": X}, ("Y",))))
    (register,) = recorder.named("register_system_shared_memory")
    await t.close()
    assert recorder.methods() == ["register_system_shared_memory", "infer", "close"]
    assert not os.path.exists(f"/dev/shm/{register['name']}")


async def test_the_warning_names_the_region_and_tritons_last_refusal() -> None:
    in_use = InferenceServerException(
        msg="Cannot unregister shared memory region, it is currently in use.",
        status="StatusCode.INTERNAL",
    )
    factory = Factory(
        {"infer": result("grpc", {"Y": X}), "unregister_system_shared_memory": in_use}
    )
    t = transport("grpc", factory, shared_memory="system", shared_memory_threshold=1)
    await t.infer(request(Call("m", {"X": X}, ("Y",))))
    (register,) = factory.named("register_system_shared_memory")
    with pytest.warns(ResourceWarning) as caught:
        await t.close()
    assert [str(w.message) for w in caught] == [
        f"shared-memory region '{register['name']}' is still registered on the server: "
        "[StatusCode.INTERNAL] Cannot unregister shared memory region, it is currently in use."
    ]


async def test_per_call_timeouts_reach_every_method() -> None:
    client, factory = make({"infer": family_reply(CLASSES)}, timeout=50)
    await client.classify(b"a", timeout=1)
    await client.classify_batch([b"a", b"b"], timeout=2)
    await client.embed("a", timeout=3)
    await client.translate("a", timeout=4)
    budgets = [round(a["client_timeout"]) for a in factory.named("infer")]
    assert budgets == [1, 2, 2, 3, 4]


async def test_defaults_top_5_beam_4_and_the_uint8_model_name() -> None:
    five = {
        "CLASS_IDS": np.arange(6, dtype=np.int64).reshape(1, 6),
        "SCORES": np.linspace(0.6, 0.1, 6, dtype=np.float32).reshape(1, 6),
        "LABELS": np.array([[b"a", b"b", b"c", b"d", b"e", b"f"]], dtype=np.object_),
    }
    client, factory = make({"infer": result("grpc", five)}, models={"classify_uint8": "px"})
    assert (await client.classify(b"img")).class_ids == [0, 1, 2, 3, 4]
    (batch,) = await client.classify_batch([np.zeros((1, 1, 3), np.uint8)])
    assert batch.class_ids == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    assert factory.named("infer")[-1]["model_name"] == "px"
    (short,) = await client.classify_batch([b"img"], top_k=2)
    assert short.class_ids == [0, 1]  # type: ignore[union-attr]
    words = {"TRANSLATION": np.array([[b"x"]], dtype=np.object_)}
    other, factory = make({"infer": result("grpc", words)})
    await other.translate("a")
    (sent,) = factory.named("infer")
    assert [describe(i) for i in sent["inputs"]][1] == {
        "name": "BEAM_SIZE", "datatype": "INT32", "shape": [1, 1], "raw": b"\x04\x00\x00\x00"
    }  # fmt: skip
    assert len(sent["inputs"]) == 2  # no MAX_LENGTH unless asked


async def test_generic_infer_names_the_model_returns_only_outputs_asked_and_retries() -> None:
    overloaded = InferenceServerException(msg="Exceeds maximum queue size", status="503")
    both = result("grpc", {"Y": X, "Z": X * 2})
    client, factory = make(
        {"infer": [overloaded, both]}, retry=Retry(attempts=2, backoff=0.0, max_backoff=0.0),
        versions={"m": 8},
    )  # fmt: skip
    out = await client.infer("m", {"X": X}, ["Y"])
    assert list(out) == ["Y"]
    assert [a["model_name"] for a in factory.named("infer")] == ["m", "m"]  # retried
    assert factory.named("infer")[0]["model_version"] == "8"
    metadata, factory = make({"get_model_metadata": {}}, versions={"bert": 2})
    await metadata.model_metadata("bert")
    assert factory.named("get_model_metadata")[0]["model_version"] == "2"


async def test_a_region_that_fails_to_go_does_not_keep_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.unit.client.test_transport import destroy_fails_once

    factory = Factory({"infer": result("grpc", {"Y": X})})
    t = transport("grpc", factory, shared_memory="system", shared_memory_threshold=1)
    await t.infer(request(Call("m", {"X": X, "X2": X}, ("Y",))))
    failed = destroy_fails_once(t, monkeypatch)
    await t.close()
    assert len(failed) == 1
    assert factory.methods()[-3:] == ["unregister_system_shared_memory"] * 2 + ["close"]
    names = [r["name"] for r in factory.named("register_system_shared_memory")]
    assert not any(os.path.exists(f"/dev/shm/{n}") for n in names)


async def test_a_connection_that_fails_to_close_is_dropped_all_the_same() -> None:
    factory = Factory({"infer": [REFUSED, result("grpc", {"Y": X})], "close": OSError("closed")})
    t = transport("grpc", factory)
    assert (await t.infer(request(Call("m", {}, ("Y",)))))["Y"].tolist() == [[1.5, 2.0]]
    assert factory.methods() == ["infer", "close", "infer"] and len(factory.specs) == 2
    await t.close()


@pytest.mark.parametrize("url", [URL, HTTP_URL])
async def test_probe_errors_name_the_url_and_the_limit(url: str) -> None:
    client, _ = make({"get_model_metadata": TimeoutError("timed out")}, url=url)
    with pytest.raises(DeadlineExceededError) as caught:
        await client.model_metadata("bert", timeout=2.5)
    assert caught.value.url == url
    assert "its 2.5 s deadline" in str(caught.value)


async def test_wait_until_ready_never_sleeps_past_its_limit() -> None:
    client, _ = make({"is_server_ready": False})
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        await client.wait_until_ready(timeout=0.05)
    assert time.monotonic() - started < 0.2  # not a whole 0.25 s poll interval


def test_every_option_reaches_the_client() -> None:
    from tests.unit.client.test_sync import check_every_option_reaches_the_client

    check_every_option_reaches_the_client(AsyncTritonClient)
