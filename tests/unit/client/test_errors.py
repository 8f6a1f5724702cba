"""triton_kit.client.errors branch by branch, without a server (fast: mutation runs).

Expected values restate the SDK's documented contract (triton_kit/client/errors.py's docstring,
docs/CLIENT.md): Triton's HTTP status -> gRPC code table, one class per failure with its
``reason`` word, ``raw_status`` as the protocol gave it, and messages that name the URL,
the model and the deadline. Nothing here is computed by the code under test.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

import aiohttp
import pytest
from tritonclient.utils import InferenceServerException

from triton_kit.client.errors import (
    CallContext,
    ClientClosedError,
    ConfigurationError,
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    ServerConnectionError,
    ServerError,
    ServerOverloadedError,
    TritonClientError,
    normalise_status,
    translate_error,
)

URL = "grpc://10.1.2.3:8001"
CONTEXT = CallContext(url=URL, model="bert", timeout=2.5)
NO_MODEL = CallContext(url="http://10.1.2.3:8000")
WHERE = "grpc://10.1.2.3:8001, model 'bert'"

# Triton's mapping of TRITONSERVER_Error codes to HTTP statuses, read backwards.
TRITON_HTTP = [
    ("400", "INVALID_ARGUMENT"),
    ("401", "UNAUTHENTICATED"),
    ("403", "PERMISSION_DENIED"),
    ("404", "NOT_FOUND"),
    ("409", "ALREADY_EXISTS"),
    ("429", "RESOURCE_EXHAUSTED"),
    ("499", "CANCELLED"),
    ("500", "INTERNAL"),
    ("501", "UNIMPLEMENTED"),
    ("503", "UNAVAILABLE"),
    ("504", "DEADLINE_EXCEEDED"),
]


def ise(message: str | None, status: str | None = None) -> InferenceServerException:
    return InferenceServerException(msg=message, status=status)


def expect(
    error: TritonClientError,
    cls: type,
    message: str,
    status: str | None,
    reason: str,
    raw: str | None,
    context: CallContext = CONTEXT,
) -> None:
    assert type(error) is cls, type(error)
    assert str(error) == message
    assert error.status == status
    assert error.reason == reason
    assert error.raw_status == raw
    assert error.url == context.url
    assert error.model == context.model
    assert error.request_id is None


# ---- statuses and the classes themselves ---------------------------------------------------


@pytest.mark.parametrize(("http", "code"), TRITON_HTTP)
def test_http_statuses_become_grpc_code_names(http: str, code: str) -> None:
    assert normalise_status(http) == code
    assert normalise_status(f"StatusCode.{code}") == code


def test_other_statuses_are_kept_and_empty_ones_are_none() -> None:
    assert normalise_status(None) is None
    assert normalise_status("") is None
    assert normalise_status("418") == "418"
    assert normalise_status("RESOURCE_EXHAUSTED") == "RESOURCE_EXHAUSTED"
    assert normalise_status("xStatusCode.INTERNAL") == "xStatusCode.INTERNAL"


@pytest.mark.parametrize(
    ("cls", "reason", "bases"),
    [
        (TritonClientError, "error", (Exception,)),
        (InvalidInputError, "invalid_input", (TritonClientError, ValueError)),
        (ConfigurationError, "configuration", (TritonClientError, ValueError)),
        (ModelUnavailableError, "model_unavailable", (TritonClientError,)),
        (ServerOverloadedError, "overloaded", (ModelUnavailableError,)),
        (DeadlineExceededError, "deadline", (TritonClientError, TimeoutError)),
        (ServerError, "server_error", (TritonClientError,)),
        (ServerConnectionError, "connection_refused", (ServerError, ConnectionError)),
        (ClientClosedError, "closed", (TritonClientError, RuntimeError)),
    ],
)
def test_each_class_has_its_reason_word(cls: type, reason: str, bases: tuple) -> None:
    error = cls("m")
    assert error.reason == reason
    assert str(error) == "m"
    assert error.status is None and error.raw_status is None
    assert error.url is None and error.model is None and error.request_id is None
    assert all(isinstance(error, base) for base in bases)


def test_fields_status_is_normalised_and_raw_status_kept() -> None:
    error = InvalidInputError("bad", "400", url="http://h:8000", model="m")
    assert (error.status, error.raw_status) == ("INVALID_ARGUMENT", "400")
    assert (error.url, error.model, error.reason) == ("http://h:8000", "m", "invalid_input")
    given = ServerError("x", "StatusCode.INTERNAL", reason="custom", raw_status="500")
    assert (given.status, given.raw_status, given.reason) == ("INTERNAL", "500", "custom")


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (TritonClientError("x"), False),
        (InvalidInputError("x"), False),
        (ModelUnavailableError("x"), False),
        (ServerOverloadedError("x"), True),
        (DeadlineExceededError("x"), False),
        (ServerError("x"), False),
        (ServerConnectionError("x"), True),
        (ServerConnectionError("x", reason="connection_refused"), True),
        (ServerConnectionError("x", reason="connection_lost"), True),
        (ServerConnectionError("x", reason="dns"), False),
        (ServerConnectionError("x", reason="tls"), False),
        (ClientClosedError("x"), False),
    ],
)
def test_only_overload_and_refused_or_lost_connections_are_retryable(
    error: TritonClientError, retryable: bool
) -> None:
    assert error.retryable is retryable


def test_renamed_keeps_everything_but_the_message() -> None:
    error = ServerConnectionError(
        "old", "StatusCode.UNKNOWN", reason="connection_lost", url=URL, model="bert",
        raw_status="StatusCode.UNKNOWN",
    )  # fmt: skip
    error.request_id = "r-7"
    new = error.renamed("item 3: old")
    assert type(new) is ServerConnectionError and new is not error
    assert str(new) == "item 3: old"
    assert (new.status, new.raw_status, new.reason) == (
        "UNKNOWN",
        "StatusCode.UNKNOWN",
        "connection_lost",
    )
    assert (new.url, new.model, new.request_id) == (URL, "bert", "r-7")
    http = InvalidInputError("bad", "400").renamed("item 0: bad")
    assert (http.status, http.raw_status) == ("INVALID_ARGUMENT", "400")


def test_call_context_prefix_names_the_model_only_when_there_is_one() -> None:
    assert CONTEXT.prefix() == WHERE
    assert NO_MODEL.prefix() == "http://10.1.2.3:8000"
    assert CallContext(url="u", model="").prefix() == "u"
    assert (NO_MODEL.model, NO_MODEL.timeout) == (None, None)


# ---- errors raised on this side of the wire -------------------------------------------------


def test_ours_pass_through_unchanged() -> None:
    ours = InvalidInputError("x")
    assert translate_error(ours, CONTEXT) is ours


@pytest.mark.parametrize(
    ("exc", "detail"),
    [
        (asyncio.TimeoutError(), "TimeoutError"),
        (TimeoutError("read took too long"), "read took too long"),
    ],
)
def test_python_timeouts_name_the_deadline(exc: BaseException, detail: str) -> None:
    error = translate_error(exc, CONTEXT)
    message = f"{WHERE}: no answer within its 2.5 s deadline ({detail})"
    expect(error, DeadlineExceededError, message, "DEADLINE_EXCEEDED", "deadline", None)


def test_a_deadline_without_a_limit_and_a_whole_second_limit() -> None:
    error = translate_error(TimeoutError(), NO_MODEL)
    message = "http://10.1.2.3:8000: no answer within its deadline (TimeoutError)"
    expect(error, DeadlineExceededError, message, "DEADLINE_EXCEEDED", "deadline", None, NO_MODEL)
    whole = CallContext(url="u", timeout=3.0)
    assert str(translate_error(TimeoutError(), whole)) == (
        "u: no answer within its 3 s deadline (TimeoutError)"
    )


class ClientConnectorDNSError(OSError):
    """Named as aiohttp names it (a ClientConnectorError: the DNS check must come first)."""


class ClientConnectorSSLError(OSError):
    """Named as aiohttp names it."""


class ClientConnectorError(OSError):
    """Named as aiohttp names it: the connector could not connect."""


class ClientDisconnectedError(OSError):
    """An OSError whose name says the peer went away."""


LOCAL = [
    (socket.gaierror(-2, "Name or service not known"), "dns",
     "cannot resolve the host (gaierror: [Errno -2] Name or service not known)"),
    (ClientConnectorDNSError("no such host"), "dns",
     "cannot resolve the host (ClientConnectorDNSError: no such host)"),
    (ssl.SSLError(1, "CERTIFICATE_VERIFY_FAILED"), "tls",
     "TLS failed (SSLError: CERTIFICATE_VERIFY_FAILED)"),
    (ClientConnectorSSLError("bad cert"), "tls", "TLS failed (ClientConnectorSSLError: bad cert)"),
    (ConnectionRefusedError(111, "Connection refused"), "connection_refused",
     "connection refused (ConnectionRefusedError: [Errno 111] Connection refused)"),
    (ClientConnectorError("cannot connect"), "connection_refused",
     "connection refused (ClientConnectorError: cannot connect)"),
    (ConnectionResetError(104, "reset by peer"), "connection_lost",
     "connection lost (ConnectionResetError: [Errno 104] reset by peer)"),
    (BrokenPipeError(32, "Broken pipe"), "connection_lost",
     "connection lost (BrokenPipeError: [Errno 32] Broken pipe)"),
    (EOFError("eof"), "connection_lost", "connection lost (EOFError: eof)"),
    (ClientDisconnectedError("gone"), "connection_lost",
     "connection lost (ClientDisconnectedError: gone)"),
    (aiohttp.ServerDisconnectedError(), "connection_lost",
     "connection lost (ServerDisconnectedError: Server disconnected)"),
]  # fmt: skip


@pytest.mark.parametrize(("exc", "reason", "detail"), LOCAL)
def test_socket_dns_and_tls_failures_are_connection_errors(
    exc: BaseException, reason: str, detail: str
) -> None:
    error = translate_error(exc, CONTEXT)
    message = f"cannot reach {URL}: {detail}"
    expect(error, ServerConnectionError, message, "UNAVAILABLE", reason, None)


class Disconnected(Exception):
    """Says 'disconnect' but is no OSError: not a lost connection."""


class ReadTimeout(Exception):
    """geventhttpclient-style timeout class: recognised by its name."""


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (OSError("disk full"), f"{WHERE}: OSError: disk full"),
        (Disconnected("x"), f"{WHERE}: Disconnected: x"),
        (RuntimeError("weird"), f"{WHERE}: RuntimeError: weird"),
    ],
)
def test_anything_else_is_a_server_error_naming_its_class(exc: BaseException, message: str) -> None:
    expect(translate_error(exc, CONTEXT), ServerError, message, None, "server_error", None)


def test_a_class_named_timeout_is_a_deadline() -> None:
    error = translate_error(ReadTimeout("ignored"), CONTEXT)
    message = f"{WHERE}: no answer within its 2.5 s deadline (ReadTimeout)"
    expect(error, DeadlineExceededError, message, "DEADLINE_EXCEEDED", "deadline", None)


# ---- errors the server (or grpc/tritonclient) reported -------------------------------------


@pytest.mark.parametrize(
    ("message", "raw", "reason"),
    [
        ("Exceeds maximum queue size", "StatusCode.UNAVAILABLE", "queue_full"),
        ("inference request exceeds MAXIMUM QUEUE SIZE for model", "503", "queue_full"),
        ("Request timeout expired", "503", "queue_timeout"),
        ("request timeout expired", "StatusCode.UNAVAILABLE", "queue_timeout"),
    ],
)
def test_queue_full_and_queue_timeout_are_overload(message: str, raw: str, reason: str) -> None:
    error = translate_error(ise(message, raw), CONTEXT)
    text = f"{WHERE}: server overloaded, retry later ({message})"
    expect(error, ServerOverloadedError, text, "UNAVAILABLE", reason, raw)
    assert error.retryable


@pytest.mark.parametrize(
    ("message", "raw"),
    [
        ("Deadline Exceeded", "StatusCode.DEADLINE_EXCEEDED"),
        ("x", "StatusCode.DEADLINE_EXCEEDED"),
        ("gateway", "504"),
        ("DEADLINE EXCEEDED while waiting", "StatusCode.INTERNAL"),
        ("Deadline Exceeded", None),
        ("Timed Out", None),  # tritonclient's HTTP timeouts carry no status
    ],
)
def test_server_deadlines(message: str, raw: str | None) -> None:
    error = translate_error(ise(message, raw), CONTEXT)
    text = f"{WHERE}: no answer within its 2.5 s deadline ({message})"
    expect(error, DeadlineExceededError, text, "DEADLINE_EXCEEDED", "deadline", raw)


def test_timed_out_with_a_status_is_not_a_deadline() -> None:
    error = translate_error(ise("execution timed out", "StatusCode.INTERNAL"), CONTEXT)
    text = f"{WHERE}: execution timed out"
    expect(error, ServerError, text, "INTERNAL", "server_error", "StatusCode.INTERNAL")


GRPC_CONNECTION = [
    ("DNS resolution failed for nohost:8001", "dns"),
    ("Name or service not known", "dns"),
    ("Temporary failure in name resolution", "dns"),
    ("failed to connect to all addresses", "connection_refused"),
    ("Connection Refused", "connection_refused"),
    ("Stream removed", "connection_lost"),
    ("Socket closed", "connection_lost"),
    ("Connection reset by peer", "connection_lost"),
    ("Broken pipe", "connection_lost"),
    ("unexpected EOF", "connection_lost"),
    ("SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER", "tls"),
    ("TLS alert", "tls"),
    ("Handshake failed", "tls"),
    ("Certificate verify failed", "tls"),
    # The first matching kind wins: dns, then refused, then lost, then tls.
    ("DNS resolution failed; failed to connect", "dns"),
    ("failed to connect: socket closed", "connection_refused"),
    ("Connection reset during SSL handshake", "connection_lost"),
]


@pytest.mark.parametrize(("message", "reason"), GRPC_CONNECTION)
@pytest.mark.parametrize(
    ("raw", "status"),
    [
        ("StatusCode.UNAVAILABLE", "UNAVAILABLE"),
        ("StatusCode.UNKNOWN", "UNKNOWN"),
        ("500", "INTERNAL"),
        (None, "UNAVAILABLE"),
    ],
)
def test_grpc_connection_failures(message: str, reason: str, raw: str | None, status: str) -> None:
    error = translate_error(ise(message, raw), CONTEXT)
    text = f"cannot reach {URL}: {message}"
    expect(error, ServerConnectionError, text, status, reason, raw)


def test_connection_words_under_another_status_are_not_connection_errors() -> None:
    error = translate_error(ise("connection refused by policy", "403"), CONTEXT)
    text = f"{WHERE}: connection refused by policy"
    expect(error, ServerError, text, "PERMISSION_DENIED", "server_error", "403")
    error = translate_error(ise("failed to connect", "StatusCode.NOT_FOUND"), CONTEXT)
    expect(
        error, ModelUnavailableError, f"{WHERE}: failed to connect", "NOT_FOUND",
        "model_unavailable", "StatusCode.NOT_FOUND",
    )  # fmt: skip


@pytest.mark.parametrize(
    "message",
    [
        "Request for Unknown Model: 'x' has no available versions",
        "Request for unknown model: 'x' IS NOT FOUND",
        "model 'x' version 1 is not ready",
        "no loaded version of model 'x'",
    ],
)
def test_model_not_found_wording_under_any_status(message: str) -> None:
    for raw, status in (("400", "INVALID_ARGUMENT"), ("StatusCode.INTERNAL", "INTERNAL")):
        error = translate_error(ise(message, raw), CONTEXT)
        expect(
            error, ModelUnavailableError, f"{WHERE}: {message}", status, "model_unavailable", raw
        )


@pytest.mark.parametrize(
    ("raw", "status", "cls", "reason"),
    [
        ("StatusCode.NOT_FOUND", "NOT_FOUND", ModelUnavailableError, "model_unavailable"),
        ("404", "NOT_FOUND", ModelUnavailableError, "model_unavailable"),
        ("StatusCode.UNAVAILABLE", "UNAVAILABLE", ModelUnavailableError, "model_unavailable"),
        ("503", "UNAVAILABLE", ModelUnavailableError, "model_unavailable"),
        ("StatusCode.INVALID_ARGUMENT", "INVALID_ARGUMENT", InvalidInputError, "invalid_input"),
        ("400", "INVALID_ARGUMENT", InvalidInputError, "invalid_input"),
        ("StatusCode.INTERNAL", "INTERNAL", ServerError, "server_error"),
        ("500", "INTERNAL", ServerError, "server_error"),
        ("StatusCode.UNKNOWN", "UNKNOWN", ServerError, "server_error"),
        ("501", "UNIMPLEMENTED", ServerError, "server_error"),
        ("429", "RESOURCE_EXHAUSTED", ServerError, "server_error"),
        (None, None, ServerError, "server_error"),
    ],
)
def test_the_status_decides_when_the_wording_has_no_hint(
    raw: str | None, status: str | None, cls: type, reason: str
) -> None:
    error = translate_error(ise("bad thing", raw), CONTEXT)
    expect(error, cls, f"{WHERE}: bad thing", status, reason, raw)


def test_without_a_model_the_message_names_only_the_url() -> None:
    error = translate_error(ise("bad shape", "400"), NO_MODEL)
    text = "http://10.1.2.3:8000: bad shape"
    expect(error, InvalidInputError, text, "INVALID_ARGUMENT", "invalid_input", "400", NO_MODEL)


def test_an_exception_without_a_message_falls_back_to_its_text() -> None:
    error = translate_error(ise(None, "StatusCode.INTERNAL"), CONTEXT)
    text = f"{WHERE}: [StatusCode.INTERNAL] "
    expect(error, ServerError, text, "INTERNAL", "server_error", "StatusCode.INTERNAL")
    error = translate_error(ise("", None), CONTEXT)
    expect(error, ServerError, f"{WHERE}: ", None, "server_error", None)
