"""triton_kit.client.transport without a server: what each adapter sends, and how it reads replies.

The tritonclient client is tests/support/recording_client.py's recorder (MOCKED ON PURPOSE: every
call is bound to the real tritonclient signature); inputs and outputs are real
tritonclient ``InferInput``/``InferRequestedOutput`` objects read back in their wire form,
and expected values are written out by hand (bytes of float32 1.5 = 00 00 c0 3f, ...).
"""

from __future__ import annotations

import os
import ssl
import subprocess
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc
import tritonclient.grpc.aio
import tritonclient.http
import tritonclient.http.aio
from tritonclient.utils import InferenceServerException

from tests.support.recording_client import Factory, describe, result
from triton_kit.client import (
    TLS,
    ConfigurationError,
    DeadlineExceededError,
    ModelUnavailableError,
    Retry,
    ServerConnectionError,
    ServerOverloadedError,
    Timeout,
)
from triton_kit.client.codecs import Call
from triton_kit.client.errors import CallContext
from triton_kit.client.options import ClientOptions
from triton_kit.client.transport import (
    OUTPUTS_CACHED,
    ClientSpec,
    Endpoint,
    Request,
    Transport,
    _ready_or_raise,
    default_factory,
    triton_dtype,
    tritonclient_module,
)

X = np.array([[1.5, 2.0]], dtype=np.float32)  # little-endian bytes written out by hand:
X_BYTES = b"\x00\x00\xc0\x3f\x00\x00\x00\x40"
TEXT = np.array([[b"hi"]], dtype=np.object_)
TEXT_WIRE = b"\x02\x00\x00\x00hi"
REFUSED = InferenceServerException(
    msg="failed to connect to all addresses; last error: UNKNOWN: Connection refused",
    status="StatusCode.UNAVAILABLE",
)
QUEUE_FULL = InferenceServerException(
    msg="Exceeds maximum queue size", status="StatusCode.UNAVAILABLE"
)
URLS = {"grpc": "grpc://10.1.2.3:8001", "http": "http://10.1.2.3:8000"}


def transport(protocol: str, factory: Factory, **options: Any) -> Transport:
    options.setdefault("retry", Retry(attempts=3, backoff=0.0, max_backoff=0.0))
    return Transport(Endpoint.parse(URLS[protocol]), ClientOptions(**options), factory)


def request(call: Call, seconds: float | None = 5.0, **fields: Any) -> Request:
    return Request(call, Timeout(request=seconds), **fields)


# -- Endpoint.parse -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "protocol", "address", "tls", "normalised"),
    [
        ("grpc://h:1", "grpc", "h:1", False, "grpc://h:1"),
        ("grpc://h", "grpc", "h:8001", False, "grpc://h:8001"),
        ("grpcs://h", "grpc", "h:8001", True, "grpcs://h:8001"),
        ("GRPCS://H:9", "grpc", "h:9", True, "grpcs://h:9"),
        ("http://h", "http", "h:8000", False, "http://h:8000"),
        ("https://h", "http", "h:443", True, "https://h:443"),
        ("https://h:8443/v2", "http", "h:8443", True, "https://h:8443"),
        ("h:7", "http", "h:7", False, "http://h:7"),
        ("h", "http", "h:8000", False, "http://h:8000"),
        ("HTTP://Host:1", "http", "host:1", False, "http://host:1"),
    ],
)
def test_endpoint_parse(url: str, protocol: str, address: str, tls: bool, normalised: str) -> None:
    assert Endpoint.parse(url) == Endpoint(protocol, address, tls, normalised)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://h:1", "unsupported URL scheme 'ftp' in 'ftp://h:1': use grpc:// or http://"),
        ("grpc://:8001", "no host in URL 'grpc://:8001'"),
        ("http://h:99999", "bad port in URL 'http://h:99999': Port out of range 0-65535"),
        ("", "no host in URL ''"),
    ],
)
def test_endpoint_parse_refuses(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Endpoint.parse(url)
    assert str(caught.value) == message
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None or caught.value.__suppress_context__


def test_tritonclient_module_per_protocol_and_style() -> None:
    assert tritonclient_module("grpc", False) is tritonclient.grpc
    assert tritonclient_module("grpc", True) is tritonclient.grpc.aio
    assert tritonclient_module("http", False) is tritonclient.http
    assert tritonclient_module("http", True) is tritonclient.http.aio


# -- default_factory: what the real client is built with --------------------------------
class Built:
    """Stands in for a tritonclient module: records the client's constructor arguments."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, bool]] = []
        self.built: list[tuple[str, dict[str, Any]]] = []

    def module(self, protocol: str, aio: bool) -> Any:
        self.asked.append((protocol, aio))
        return SimpleNamespace(InferenceServerClient=self.client)

    def client(self, address: str, **kwargs: Any) -> str:
        self.built.append((address, kwargs))
        return "client"


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Built:
    recorder = Built()
    monkeypatch.setattr("triton_kit.client.transport.tritonclient_module", recorder.module)
    return recorder


CHANNEL_ARGS = [  # the documented channel settings, restated
    ("grpc.max_send_message_length", 2147483647),
    ("grpc.max_receive_message_length", 2147483647),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.keepalive_time_ms", 2147483647),
    ("grpc.keepalive_timeout_ms", 20000),
    ("grpc.keepalive_permit_without_calls", False),
    ("grpc.http2.max_pings_without_data", 2),
]


@pytest.mark.parametrize("aio", [False, True])
def test_grpc_client_settings(built: Built, aio: bool) -> None:
    spec = ClientSpec(Endpoint.parse("grpc://h:5"), ClientOptions(), aio=aio)
    assert default_factory(spec) == "client"
    assert built.asked == [("grpc", aio)]
    assert built.built == [("h:5", {"ssl": False, "channel_args": CHANNEL_ARGS})]


def test_grpcs_passes_the_certificate_files(built: Built) -> None:
    tls = TLS(ca_file="ca.pem", cert_file="me.pem", key_file="me.key")
    default_factory(ClientSpec(Endpoint.parse("grpcs://h"), ClientOptions(tls=tls), aio=False))
    assert built.built == [
        (
            "h:8001",
            {
                "ssl": True,
                "channel_args": CHANNEL_ARGS,
                "root_certificates": "ca.pem",
                "private_key": "me.key",
                "certificate_chain": "me.pem",
            },
        )
    ]


def test_sync_http_client_settings(built: Built) -> None:
    options = ClientOptions(timeout=Timeout(request=3.0, connect=4.5))
    default_factory(ClientSpec(Endpoint.parse("http://h"), options, aio=False, network_timeout=7))
    default_factory(ClientSpec(Endpoint.parse("http://h"), options, aio=False))
    common = {"ssl": False, "ssl_options": None, "insecure": False, "connection_timeout": 4.5}
    assert built.asked == [("http", False)] * 2
    assert built.built == [
        ("h:8000", {**common, "network_timeout": 7}),
        ("h:8000", {**common, "network_timeout": 86400.0}),  # a day: no per-call limit
    ]


def test_https_passes_only_the_files_given(built: Built) -> None:
    endpoint = Endpoint.parse("https://h")
    for tls in (TLS(ca_file="ca.pem", insecure=True), TLS(cert_file="c", key_file="k"), TLS()):
        default_factory(ClientSpec(endpoint, ClientOptions(tls=tls), aio=False))
    sent = [(kwargs["ssl"], kwargs["ssl_options"], kwargs["insecure"]) for _, kwargs in built.built]
    assert sent == [
        (True, {"ca_certs": "ca.pem"}, True),
        (True, {"certfile": "c", "keyfile": "k"}, False),
        (True, None, False),
    ]


def test_async_http_client_settings(built: Built) -> None:
    options = ClientOptions(tls=TLS(insecure=True))
    default_factory(ClientSpec(Endpoint.parse("http://h"), options, aio=True, network_timeout=2))
    default_factory(ClientSpec(Endpoint.parse("http://h"), options, aio=True))
    default_factory(ClientSpec(Endpoint.parse("https://h"), options, aio=True))
    assert built.asked == [("http", True)] * 3
    (_, first), (_, second), (address, third) = built.built
    assert first == {"ssl": False, "ssl_context": None, "conn_timeout": 2}
    assert second == {"ssl": False, "ssl_context": None, "conn_timeout": 86400.0}
    assert address == "h:443" and third["ssl"] is True and third["conn_timeout"] == 86400.0
    context = third["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname is False and context.verify_mode == ssl.CERT_NONE


# -- the TLS context of the asyncio HTTP client: real certificates -----------------------
@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("tls")
    files = {"cert": str(folder / "cert.pem"), "key": str(folder / "key.pem")}
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=triton-kit-test-ca", "-keyout", files["key"], "-out", files["cert"]],
        check=True, capture_output=True,
    )  # fmt: skip
    return files


def https_context(tls: TLS | None, built: Built) -> ssl.SSLContext:
    options = ClientOptions(tls=tls)
    default_factory(ClientSpec(Endpoint.parse("https://h"), options, aio=True))
    return built.built[-1][1]["ssl_context"]


def test_tls_context_verifies_by_default(built: Built) -> None:
    for tls in (None, TLS()):
        context = https_context(tls, built)
        assert context.check_hostname is True and context.verify_mode == ssl.CERT_REQUIRED


def test_tls_context_trusts_the_ca_file(built: Built, certificates: dict[str, str]) -> None:
    context = https_context(TLS(ca_file=certificates["cert"]), built)
    subjects = [dict(pair[0] for pair in ca["subject"]) for ca in context.get_ca_certs()]
    assert {"commonName": "triton-kit-test-ca"} in subjects
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_tls_context_loads_the_client_certificate(
    built: Built, certificates: dict[str, str]
) -> None:
    tls = TLS(cert_file=certificates["cert"], key_file=certificates["key"])
    https_context(tls, built)  # loads: no error
    with pytest.raises(ssl.SSLError):  # a key that does not match: load_cert_chain ran
        https_context(TLS(cert_file=certificates["cert"], key_file=os.devnull), built)


# -- prepare: the tensors and arguments of one attempt ----------------------------------
def test_grpc_inputs_outputs_and_arguments() -> None:
    factory = Factory({"infer": result("grpc", {"Y": X})})
    t = transport("grpc", factory)
    call = Call("m", {"X": X, "TEXT": TEXT}, ("Y", "Z"))
    prepared = t.prepare(request(call), remaining=2.5)
    assert [describe(i) for i in prepared.inputs] == [
        {"name": "X", "datatype": "FP32", "shape": [1, 2], "raw": X_BYTES},
        {"name": "TEXT", "datatype": "BYTES", "shape": [1, 1], "raw": TEXT_WIRE},
    ]
    assert [describe(o) for o in prepared.outputs or []] == [{"name": "Y"}, {"name": "Z"}]
    assert prepared.kwargs == {
        "model_version": "",
        "request_id": "",
        "headers": None,
        "timeout": 2500000,  # microseconds, Triton's queue deadline
        "client_timeout": 2.5,
    }
    assert prepared.regions == [] and prepared.new_regions == []


def test_http_inputs_are_binary_and_outputs_asked_binary() -> None:
    t = transport("http", Factory())
    prepared = t.prepare(request(Call("m", {"X": X, "TEXT": TEXT}, ("Y",))), remaining=0.25)
    assert [describe(i) for i in prepared.inputs] == [
        {"name": "X", "shape": [1, 2], "datatype": "FP32",
         "parameters": {"binary_data_size": 8}, "raw": X_BYTES},
        {"name": "TEXT", "shape": [1, 1], "datatype": "BYTES",
         "parameters": {"binary_data_size": 6}, "raw": TEXT_WIRE},
    ]  # fmt: skip
    assert [describe(o) for o in prepared.outputs or []] == [
        {"name": "Y", "parameters": {"binary_data": True}}
    ]
    assert prepared.kwargs == {
        "model_version": "",
        "request_id": "",
        "headers": None,
        "timeout": 250000,
    }


def test_no_outputs_asked_means_none_and_no_deadline_means_no_timeouts() -> None:
    for protocol in ("grpc", "http"):
        prepared = transport(protocol, Factory()).prepare(request(Call("m", {}, ())), None)
        assert prepared.inputs == [] and prepared.outputs is None
        assert prepared.kwargs == {"model_version": "", "request_id": "", "headers": None}


@pytest.mark.parametrize(("remaining", "micros"), [(1e-9, 1), (3.2e-6, 3), (0.0000019, 1)])
def test_the_queue_deadline_is_whole_microseconds_at_least_one(
    remaining: float, micros: int
) -> None:
    prepared = transport("grpc", Factory()).prepare(request(Call("m", {}, ())), remaining)
    assert prepared.kwargs["timeout"] == micros
    assert prepared.kwargs["client_timeout"] == remaining


@pytest.mark.parametrize(
    ("protocol", "sent"),
    [
        ("grpc", {"compression_algorithm": "deflate"}),
        ("http", {"request_compression_algorithm": "deflate",
                  "response_compression_algorithm": "deflate"}),
    ],
)  # fmt: skip
def test_compression_names_per_protocol(protocol: str, sent: dict[str, str]) -> None:
    t = transport(protocol, Factory(), compression="deflate")
    kwargs = t.prepare(request(Call("m", {}, ())), None).kwargs
    assert kwargs == {"model_version": "", "request_id": "", "headers": None, **sent}


def test_version_request_id_and_headers() -> None:
    t = transport("grpc", Factory(), versions={"m": "3"}, headers={"a": "1", "b": "2"})
    pinned = t.prepare(request(Call("m", {}, ()), request_id="r1", headers={"b": "9"}), None)
    assert pinned.kwargs == {
        "model_version": "3",
        "request_id": "r1",
        "headers": {"a": "1", "b": "9"},  # the call's own headers win
    }
    chosen = t.prepare(request(Call("m", {}, ()), version="7"), None)
    assert chosen.kwargs["model_version"] == "7"
    other = t.prepare(request(Call("n", {}, ())), None)
    assert other.kwargs["model_version"] == ""


@pytest.mark.parametrize(
    ("protocol", "name"),
    [("grpc", "triton-grpc-protocol-triton-kit-api-key"), ("http", "triton-kit-api-key")],
)
def test_api_key_header_per_protocol(protocol: str, name: str) -> None:
    t = transport(protocol, Factory(), api_key="s3cret", headers={"x": "1"})
    assert t.headers() == {name: "s3cret", "x": "1"}
    assert t.headers({name: "mine"}) == {name: "mine", "x": "1"}
    assert transport(protocol, Factory(), api_key="").headers() is None


def test_headers_are_a_new_dict_each_call() -> None:
    """The static headers are merged once; each call still gets its own dict to keep."""
    t = transport("grpc", Factory(), headers={"x": "1"})
    first = t.headers()
    assert first == {"x": "1"}
    first["x"] = "changed"  # a caller (or tritonclient) changing one call's headers
    assert t.headers() == {"x": "1"} and t.headers({"y": "2"}) == {"x": "1", "y": "2"}


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_requested_outputs_repeat_as_fresh_lists(protocol: str) -> None:
    """A transport builds the tritonclient outputs of a tuple of names once: every call gets
    them in the same wire form, in a list of its own."""
    t = transport(protocol, Factory())
    call = Call("m", {}, ("Y", "Z"))
    first, second = t.prepare(request(call), None), t.prepare(request(call), None)
    assert first.outputs is not second.outputs
    assert [describe(o) for o in first.outputs or []] == [describe(o) for o in second.outputs or []]
    assert [describe(o)["name"] for o in second.outputs or []] == ["Y", "Z"]


def test_requested_outputs_past_the_cache_are_built_per_call() -> None:
    t = transport("grpc", Factory())
    for n in range(OUTPUTS_CACHED + 3):
        names = (f"O{n}", "Y")
        prepared = t.prepare(request(Call("m", {}, names)), None)
        assert [describe(o) for o in prepared.outputs or []] == [{"name": f"O{n}"}, {"name": "Y"}]
    assert len(t._outputs) == OUTPUTS_CACHED


def test_triton_dtype_names_and_unknown_dtypes() -> None:
    assert triton_dtype(np.dtype(np.object_)) == "BYTES"
    assert triton_dtype(np.dtype(np.int32)) == "INT32"
    assert triton_dtype(np.dtype(np.complex64)) is None  # as np_to_triton_dtype: no name


# -- infer: one call end to end ---------------------------------------------------------
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_infer_sends_one_call_and_reads_the_named_outputs(protocol: str) -> None:
    y = np.array([[7, 8, 9]], dtype=np.int32)
    factory = Factory({"infer": result(protocol, {"Y": y, "Z": X})})
    t = transport(protocol, factory, versions={"m": "2"})
    out = t.infer(request(Call("m", {"X": X}, ("Y",)), 4.0, request_id="q"))
    assert list(out) == ["Y"] and out["Y"].tolist() == [[7, 8, 9]] and out["Y"].dtype == np.int32
    (name, sent), *rest = factory.calls
    assert name == "infer" and rest == []
    assert sent["model_name"] == "m" and sent["model_version"] == "2"
    assert sent["request_id"] == "q" and sent["headers"] is None
    assert [describe(i)["raw"] for i in sent["inputs"]] == [X_BYTES]
    assert [describe(o)["name"] for o in sent["outputs"]] == ["Y"]
    assert 3_900_000 < sent["timeout"] <= 4_000_000
    assert factory.specs == [
        ClientSpec(
            t.endpoint, t.options, aio=False, network_timeout=4.0 if protocol == "http" else None
        )
    ]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_no_outputs_named_returns_every_output_of_the_response(protocol: str) -> None:
    words = np.array([[b"ab"], [b"c"]], dtype=np.object_)
    factory = Factory({"infer": result(protocol, {"A": X, "B": words})})
    out = transport(protocol, factory).infer(request(Call("m", {"X": X}, ())))
    assert list(out) == ["A", "B"]
    assert out["A"].tolist() == [[1.5, 2.0]]
    assert [v.decode() if isinstance(v, bytes) else v for v in out["B"].reshape(-1)] == ["ab", "c"]


def test_http_response_without_outputs_is_empty() -> None:
    import tritonclient.http as http

    empty = http.InferResult.from_response_body(b'{"model_name": "m"}')
    out = transport("http", Factory({"infer": empty})).infer(request(Call("m", {}, ())))
    assert out == {}


def test_http_keeps_one_connection_per_timeout_grpc_one_in_all() -> None:
    for protocol, expected in (("http", [1.0, 2.0, None]), ("grpc", [None])):
        factory = Factory({"infer": result(protocol, {"Y": X})})
        t = transport(protocol, factory)
        for seconds in (1.0, 2.0, 1.0, None):
            t.infer(request(Call("m", {}, ("Y",)), seconds))
        assert [spec.network_timeout for spec in factory.specs] == expected
        assert all(spec.aio is False for spec in factory.specs)


def test_a_connection_failure_drops_every_connection_before_the_retry() -> None:
    factory = Factory({"infer": [REFUSED, result("http", {"Y": X})]})
    t = transport("http", factory)
    t._client(9.0)  # another connection, open before the call
    assert t.infer(request(Call("m", {}, ("Y",)), 1.0))["Y"].tolist() == [[1.5, 2.0]]
    assert factory.methods() == ["infer", "close", "close", "infer"]
    assert [spec.network_timeout for spec in factory.specs] == [9.0, 1.0, 1.0]


def test_overload_is_retried_on_the_same_connection() -> None:
    factory = Factory({"infer": [QUEUE_FULL, result("grpc", {"Y": X})]})
    t = transport("grpc", factory)
    t.infer(request(Call("m", {}, ("Y",))))
    assert factory.methods() == ["infer", "infer"] and len(factory.specs) == 1


def test_a_failure_names_the_request_id_only_when_one_was_given() -> None:
    failing = InferenceServerException(msg="boom", status="StatusCode.INTERNAL")
    t = transport("grpc", Factory({"infer": failing}))
    with pytest.raises(Exception) as caught:
        t.infer(request(Call("m", {}, ()), request_id="id-9"))
    assert caught.value.request_id == "id-9"  # type: ignore[attr-defined]
    assert caught.value.__cause__ is failing
    with pytest.raises(Exception) as caught:
        t.infer(request(Call("m", {}, ())))
    assert caught.value.request_id is None  # type: ignore[attr-defined]


# -- readiness and metadata probes --------------------------------------------------------
def test_grpc_probes_send_headers_and_the_deadline() -> None:
    metadata = {"name": "bert", "outputs": []}
    factory = Factory({"is_server_ready": 1, "is_model_ready": 0, "get_model_metadata": metadata})
    t = transport("grpc", factory, headers={"h": "v"})
    assert t.server_ready(3.0) is True
    assert t.model_ready("bert", "2", 3.0) is False
    assert t.model_metadata("bert", "2", 3.0) is metadata
    assert t.server_ready(None) is True
    assert factory.calls == [
        ("is_server_ready", {"headers": {"h": "v"}, "client_timeout": 3.0}),
        ("is_model_ready", {"model_name": "bert", "model_version": "2",
                            "headers": {"h": "v"}, "client_timeout": 3.0}),
        ("get_model_metadata", {"model_name": "bert", "model_version": "2",
                                "headers": {"h": "v"}, "as_json": True, "client_timeout": 3.0}),
        ("is_server_ready", {"headers": {"h": "v"}}),
    ]  # fmt: skip


def test_http_probes_send_headers_only() -> None:
    factory = Factory({"is_server_ready": True, "is_model_ready": True, "get_model_metadata": {}})
    t = transport("http", factory)
    t.server_ready(3.0)
    t.model_ready("bert", "", 3.0)
    t.model_metadata("bert", "1", 3.0)
    assert factory.calls == [
        ("is_server_ready", {"headers": None}),
        ("is_model_ready", {"model_name": "bert", "model_version": "", "headers": None}),
        ("get_model_metadata", {"model_name": "bert", "model_version": "1", "headers": None}),
    ]
    assert [spec.network_timeout for spec in factory.specs] == [3.0]


def test_probe_failures_name_the_model_and_limit() -> None:
    unknown = InferenceServerException(msg="Request for unknown model: 'nope' is not found",
                                       status="StatusCode.NOT_FOUND")  # fmt: skip
    t = transport("grpc", Factory({"get_model_metadata": unknown, "is_model_ready": unknown,
                                   "is_server_ready": unknown}))  # fmt: skip
    with pytest.raises(ModelUnavailableError) as caught:
        t.model_metadata("nope", "", 2.0)
    assert caught.value.model == "nope" and caught.value.__cause__ is unknown
    assert caught.value.url == "grpc://10.1.2.3:8001"
    assert t.model_ready("nope", "", 2.0) is False  # not (yet) loaded: not ready
    with pytest.raises(ModelUnavailableError):
        t.server_ready(2.0)  # no model asked about: the answer is not "not ready"


def test_ready_or_raise() -> None:
    context = CallContext("grpc://h:1", None, 1.0)
    assert _ready_or_raise(REFUSED, context) is False
    dns = InferenceServerException(
        msg="DNS resolution failed for h", status="StatusCode.UNAVAILABLE"
    )
    with pytest.raises(ServerConnectionError) as caught:
        _ready_or_raise(dns, context)
    assert caught.value.__cause__ is dns
    late = TimeoutError("timed out")
    with pytest.raises(DeadlineExceededError):
        _ready_or_raise(late, context)
    overloaded = InferenceServerException(msg="Exceeds maximum queue size", status="503")
    assert _ready_or_raise(overloaded, CallContext("http://h:1", "m", 1.0)) is False
    with pytest.raises(ServerOverloadedError):
        _ready_or_raise(overloaded, CallContext("http://h:1", None, 1.0))


def test_close_closes_every_connection_and_forgets_them() -> None:
    factory = Factory({"infer": result("http", {"Y": X})})
    t = transport("http", factory)
    t.infer(request(Call("m", {}, ("Y",)), 1.0))
    t.infer(request(Call("m", {}, ("Y",)), 2.0))
    t.close()
    assert factory.methods() == ["infer", "infer", "close", "close"]
    t.close()  # nothing left to close; no connection opened to unregister nothing
    assert factory.methods() == ["infer", "infer", "close", "close"]
    assert len(factory.specs) == 2


def test_a_failing_close_does_not_stop_the_others() -> None:
    factory = Factory({"infer": result("http", {"Y": X}), "close": [OSError("gone"), None]})
    t = transport("http", factory)
    t.infer(request(Call("m", {}, ("Y",)), 1.0))
    t.infer(request(Call("m", {}, ("Y",)), 2.0))
    t.close()
    assert factory.methods()[2:] == ["close", "close"]
    t.infer(request(Call("m", {}, ("Y",)), 1.0))
    assert len(factory.specs) == 3  # a fresh connection after close()


# -- system shared memory through the transport (real /dev/shm regions) -------------------
def shm_transport(protocol: str, factory: Factory, threshold: int = 8, **options: Any) -> Transport:
    return transport(
        protocol, factory, shared_memory="system", shared_memory_threshold=threshold, **options
    )


def dev_shm(name: str, size: int) -> bytes:
    with open(f"/dev/shm/{name}", "rb") as region:
        return region.read(size)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_large_inputs_travel_in_a_registered_region(protocol: str) -> None:
    factory = Factory({"infer": result(protocol, {"Y": X})})
    t = shm_transport(protocol, factory, api_key="k")
    small = np.array([3.0], dtype=np.float32)  # 4 bytes: under the threshold of 8
    t.infer(request(Call("m", {"X": X, "S": small}, ("Y",))))
    (register, arguments), (infer, sent) = factory.calls
    name = arguments["name"]
    assert register == "register_system_shared_memory" and infer == "infer"
    key = "triton-grpc-protocol-triton-kit-api-key" if protocol == "grpc" else "triton-kit-api-key"
    assert arguments == {"name": name, "key": f"/{name}", "byte_size": 8, "headers": {key: "k"}}
    assert name.startswith(f"tkclient_{os.getpid()}_")
    assert dev_shm(name, 8) == X_BYTES
    wire = [describe(i) for i in sent["inputs"]]
    assert wire[0]["parameters"] == {"shared_memory_region": name, "shared_memory_byte_size": 8}
    assert wire[0].get("raw") is None
    assert wire[1]["raw"] == b"\x00\x00\x40\x40"  # 3.0, in the request itself
    t.close()
    # HTTP unregisters on a connection with the client's own timeout (60 s), a second one
    closes = [("close", {})] * len(factory.specs)
    assert len(closes) == (2 if protocol == "http" else 1)
    assert factory.specs[-1].network_timeout == (60.0 if protocol == "http" else None)
    assert factory.calls[2:] == [
        ("unregister_system_shared_memory", {"name": name, "headers": {key: "k"}}),
        *closes,
    ]
    assert not os.path.exists(f"/dev/shm/{name}")


def test_regions_are_reused_after_each_call_even_a_failed_one() -> None:
    failing = InferenceServerException(msg="boom", status="StatusCode.INTERNAL")
    ok = result("grpc", {"Y": X})
    factory = Factory({"infer": [ok, failing, ok]})
    t = shm_transport("grpc", factory)
    call = Call("m", {"X": X}, ("Y",))
    t.infer(request(call))
    with pytest.raises(Exception, match="boom"):
        t.infer(request(call))
    t.infer(request(Call("m", {"X": X[:, :1]}, ("Y",)), 5.0))  # 4 bytes: not over 8
    t.infer(request(Call("m", {"X": np.zeros((1, 4), np.float32)}, ("Y",))))  # 16: a new one
    three = {"X": X, "X2": X, "X3": X}  # the 8- and 16-byte regions, and a new 8-byte one
    t.infer(request(Call("m", three, ("Y",))))
    registered = factory.named("register_system_shared_memory")
    assert [r["byte_size"] for r in registered] == [8, 16, 8]
    assert factory.methods().count("infer") == 5
    assert [
        describe(i)["parameters"]["shared_memory_region"]
        for i in factory.named("infer")[-1]["inputs"]
    ] == [registered[0]["name"], registered[1]["name"], registered[2]["name"]]
    names = [r["name"] for r in registered]
    assert len(set(names)) == 3
    t.close()
    assert [u["name"] for u in factory.named("unregister_system_shared_memory")] == names
    assert not any(os.path.exists(f"/dev/shm/{n}") for n in names)


def test_an_empty_input_never_takes_a_region() -> None:
    factory = Factory({"infer": result("grpc", {"Y": X})})
    t = shm_transport("grpc", factory, threshold=0)
    t.infer(request(Call("m", {"E": np.zeros((1, 0), np.float32)}, ("Y",))))
    assert factory.methods() == ["infer"]
    t.close()
    assert factory.methods() == ["infer", "close"]


def test_bytes_inputs_are_written_length_prefixed() -> None:
    factory = Factory({"infer": result("http", {"Y": X})})
    t = shm_transport("http", factory, threshold=6)
    t.infer(request(Call("m", {"TEXT": TEXT}, ("Y",))))
    (arguments,) = factory.named("register_system_shared_memory")
    assert arguments["byte_size"] == 6 and dev_shm(arguments["name"], 6) == TEXT_WIRE
    t.close()


def test_cuda_regions_register_with_the_raw_handle_and_device() -> None:
    """No GPU here: the pool's CUDA module is a stand-in (MOCKED ON PURPOSE) that hands out
    raw handles; what is checked is the call bound to tritonclient's real signature."""
    from triton_kit.client.shm import Region

    t = transport("grpc", Factory(), shared_memory="system", cuda_device=2, api_key="k")
    assert t.unregister_name() == "unregister_system_shared_memory"
    assert t.pool is not None
    t.pool.kind = "cuda"
    t.pool._module = SimpleNamespace(get_raw_handle=lambda handle: b"raw-" + handle)
    method, args, kwargs = t.register_args(Region("r", "", 64, b"h"))
    client = t.factory(ClientSpec(t.endpoint, t.options, aio=False))
    getattr(client, method)(*args, **kwargs)
    assert t.factory.calls == [  # type: ignore[attr-defined]
        ("register_cuda_shared_memory", {
            "name": "r", "raw_handle": b"raw-h", "device_id": 2, "byte_size": 64,
            "headers": {"triton-grpc-protocol-triton-kit-api-key": "k"}}),
    ]  # fmt: skip
    assert t.unregister_name() == "unregister_cuda_shared_memory"
    assert transport("grpc", Factory()).unregister_name() == "unregister_system_shared_memory"


def test_close_after_a_lost_connection_still_unregisters() -> None:
    factory = Factory({"infer": REFUSED})
    t = shm_transport("grpc", factory, threshold=1, retry=Retry.off())
    with pytest.raises(ServerConnectionError):
        t.infer(request(Call("m", {"X": X}, ("Y",))))
    (register,) = factory.named("register_system_shared_memory")
    t.close()
    assert factory.methods() == [
        "register_system_shared_memory", "infer", "close",
        "unregister_system_shared_memory", "close",
    ]  # fmt: skip
    assert factory.named("unregister_system_shared_memory") == [
        {"name": register["name"], "headers": None}
    ]
    assert not os.path.exists(f"/dev/shm/{register['name']}")


def test_close_destroys_the_regions_even_if_no_connection_can_be_made() -> None:
    def factory(spec: ClientSpec) -> Any:
        if calls:
            raise OSError("no more connections")
        return recorder(spec)

    recorder = Factory({"infer": REFUSED})
    calls = recorder.calls
    t = shm_transport("grpc", recorder, threshold=1, retry=Retry.off())
    t.factory = factory
    with pytest.raises(ServerConnectionError):
        t.infer(request(Call("m", {"X": X}, ("Y",))))
    (register,) = recorder.named("register_system_shared_memory")
    t.close()
    assert recorder.methods() == ["register_system_shared_memory", "infer", "close"]
    assert not os.path.exists(f"/dev/shm/{register['name']}")


def test_a_one_byte_input_is_large_enough_for_a_region() -> None:
    factory = Factory({"infer": result("grpc", {"Y": X})})
    t = shm_transport("grpc", factory, threshold=0)
    t.infer(request(Call("m", {"B": np.array([7], dtype=np.uint8)}, ("Y",))))
    (register,) = factory.named("register_system_shared_memory")
    assert register["byte_size"] == 1 and dev_shm(register["name"], 1) == b"\x07"
    t.close()


def test_fail_keeps_a_request_id_the_error_already_has() -> None:
    t = transport("grpc", Factory())
    context = CallContext(t.url, "m", 1.0)
    named = ServerConnectionError("gone", "UNAVAILABLE")
    named.request_id = "first"
    assert t.fail(named, context, "second").request_id == "first"
    assert t.fail(ServerConnectionError("gone"), context, "second").request_id == "second"
    assert t.fail(ServerConnectionError("gone"), context, "").request_id is None


def test_a_connection_that_fails_to_close_is_dropped_all_the_same() -> None:
    factory = Factory({"infer": [REFUSED, result("grpc", {"Y": X})], "close": OSError("closed")})
    t = transport("grpc", factory)
    assert t.infer(request(Call("m", {}, ("Y",))))["Y"].tolist() == [[1.5, 2.0]]
    assert factory.methods() == ["infer", "close", "infer"] and len(factory.specs) == 2


IN_USE = InferenceServerException(
    msg="Cannot unregister shared memory region, it is currently in use.",
    status="StatusCode.INTERNAL",
)


def test_the_warning_names_the_region_and_tritons_last_refusal() -> None:
    factory = Factory(
        {"infer": result("grpc", {"Y": X}), "unregister_system_shared_memory": IN_USE}
    )
    t = shm_transport("grpc", factory, threshold=1)
    t.infer(request(Call("m", {"X": X}, ("Y",))))
    (register,) = factory.named("register_system_shared_memory")
    with pytest.warns(ResourceWarning) as caught:
        t.close()
    assert [str(w.message) for w in caught] == [
        f"shared-memory region '{register['name']}' is still registered on the server: "
        "[StatusCode.INTERNAL] Cannot unregister shared memory region, it is currently in use."
    ]


def destroy_fails_once(t: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first region's destroy raises (after destroying it: nothing leaks)."""
    assert t.pool is not None
    real, failed = t.pool.destroy, []

    def destroy(region: Any) -> None:
        real(region)
        if not failed:
            failed.append(region.name)
            raise OSError("cannot unmap")

    monkeypatch.setattr(t.pool, "destroy", destroy)
    return failed


def test_a_region_that_fails_to_go_does_not_keep_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    factory = Factory({"infer": result("grpc", {"Y": X})})
    t = shm_transport("grpc", factory, threshold=1)
    t.infer(request(Call("m", {"X": X, "X2": X}, ("Y",))))
    failed = destroy_fails_once(t, monkeypatch)
    t.close()
    assert len(failed) == 1
    assert factory.methods()[-3:] == ["unregister_system_shared_memory"] * 2 + ["close"]
    names = [r["name"] for r in factory.named("register_system_shared_memory")]
    assert not any(os.path.exists(f"/dev/shm/{n}") for n in names)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_probe_errors_name_the_url_and_the_limit(protocol: str) -> None:
    late = TimeoutError("timed out")
    t = transport(protocol, Factory({"get_model_metadata": late}))
    with pytest.raises(DeadlineExceededError) as caught:
        t.model_metadata("bert", "", 2.5)
    assert caught.value.url == URLS[protocol]
    assert "its 2.5 s deadline" in str(caught.value)
