"""One exception hierarchy for both protocols, and the one place that maps to it.

Every error carries a normalised ``status`` (gRPC's code names, whatever the protocol),
a ``reason`` (what went wrong, in a word), the ``url`` and ``model`` of the call, and
the ``raw_status`` the protocol gave (``'StatusCode.INVALID_ARGUMENT'``, ``'400'``).

    TritonClientError
    ├── InvalidInputError (ValueError)        bad content: rejected by the server or the SDK
    ├── ConfigurationError (ValueError)       a bad URL or client option
    ├── ModelUnavailableError                 unknown, unloaded or not-ready model
    │   └── ServerOverloadedError             queue full / timed out in the queue: retry later
    ├── DeadlineExceededError (TimeoutError)  the call's deadline passed
    ├── ServerError                           the server failed
    │   └── ServerConnectionError (ConnectionError)  refused, lost, DNS or TLS failure
    └── ClientClosedError                     the client was used after close()
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

# HTTP status -> gRPC code name (Triton's own mapping of TRITONSERVER_Error codes).
HTTP_STATUS = {
    "400": "INVALID_ARGUMENT",
    "401": "UNAUTHENTICATED",
    "403": "PERMISSION_DENIED",
    "404": "NOT_FOUND",
    "409": "ALREADY_EXISTS",
    "429": "RESOURCE_EXHAUSTED",
    "499": "CANCELLED",
    "500": "INTERNAL",
    "501": "UNIMPLEMENTED",
    "503": "UNAVAILABLE",
    "504": "DEADLINE_EXCEEDED",
}


class TritonClientError(Exception):
    """Base class: every error the SDK raises derives from it."""

    reason: str = "error"
    request_id: str | None = None

    def __init__(
        self,
        message: str,
        status: str | None = None,
        *,
        reason: str | None = None,
        url: str | None = None,
        model: str | None = None,
        raw_status: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = normalise_status(status)
        self.raw_status = raw_status if raw_status is not None else status
        self.reason = reason or type(self).reason
        self.url = url
        self.model = model

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed if sent again later."""
        return False

    def renamed(self, message: str) -> TritonClientError:
        """The same error (class, status, reason, url) with another message."""
        error = type(self)(
            message,
            self.status,
            reason=self.reason,
            url=self.url,
            model=self.model,
            raw_status=self.raw_status,
        )
        error.request_id = self.request_id
        return error


class InvalidInputError(TritonClientError, ValueError):
    """The request's content was rejected (INVALID_ARGUMENT / HTTP 400, or by the SDK first)."""

    reason = "invalid_input"


class ConfigurationError(TritonClientError, ValueError):
    """A client option or URL is wrong; nothing was sent."""

    reason = "configuration"


class ModelUnavailableError(TritonClientError):
    """The model is unknown, not loaded, or not ready."""

    reason = "model_unavailable"


class ServerOverloadedError(ModelUnavailableError):
    """Triton refused the request: its queue is full or the request timed out waiting in it.

    Retry later (the SDK retries it itself when retries are on).
    """

    reason = "overloaded"

    @property
    def retryable(self) -> bool:
        return True


class DeadlineExceededError(TritonClientError, TimeoutError):
    """The call did not finish within its timeout."""

    reason = "deadline"


class ServerError(TritonClientError):
    """The server failed, or could not be reached."""

    reason = "server_error"


class ServerConnectionError(ServerError, ConnectionError):
    """No answer from the server: connection refused or lost, DNS or TLS failure.

    ``reason`` says which: ``connection_refused``, ``connection_lost``, ``dns``, ``tls``.
    """

    reason = "connection_refused"

    @property
    def retryable(self) -> bool:
        return self.reason in {"connection_refused", "connection_lost"}


class ClientClosedError(TritonClientError, RuntimeError):
    """The client was used after ``close()``."""

    reason = "closed"


def normalise_status(status: str | None) -> str | None:
    """'StatusCode.INVALID_ARGUMENT' and '400' both become 'INVALID_ARGUMENT'."""
    if status is None or status == "":
        return None
    text = str(status)
    if text.startswith("StatusCode."):
        return text.removeprefix("StatusCode.")
    return HTTP_STATUS.get(text, text)


@dataclass(frozen=True)
class CallContext:
    """What an error message names: where the call went, for what, within which limit."""

    url: str
    model: str | None = None
    timeout: float | None = None

    def prefix(self) -> str:
        return f"{self.url}, model {self.model!r}" if self.model else self.url


_NOT_FOUND_HINTS = ("unknown model", "is not found", "is not ready", "no loaded version")
_OVERLOAD_HINTS = {
    "exceeds maximum queue size": "queue_full",
    "request timeout expired": "queue_timeout",
}
_LOST_HINTS = ("stream removed", "socket closed", "connection reset", "broken pipe", "eof")
_DNS_HINTS = ("dns resolution failed", "name or service not known", "name resolution")
_TLS_HINTS = ("ssl", "tls", "handshake", "certificate")


def translate_error(exc: BaseException, context: CallContext) -> TritonClientError:
    """Map tritonclient, gRPC, HTTP, socket and timeout errors to this hierarchy."""
    if isinstance(exc, TritonClientError):
        return exc
    local = _local_error(exc, context)
    if local is not None:
        return local
    from tritonclient.utils import InferenceServerException

    if isinstance(exc, InferenceServerException):
        return _server_error(str(exc.status() or ""), exc.message() or str(exc), context)
    name = type(exc).__name__
    if "timeout" in name.lower():
        return _deadline(name, context, None)
    return ServerError(f"{context.prefix()}: {name}: {exc}", url=context.url, model=context.model)


def _local_error(exc: BaseException, context: CallContext) -> TritonClientError | None:
    """Errors raised on this side of the wire: timeouts, sockets, TLS, DNS."""
    if isinstance(exc, (asyncio.TimeoutError, socket.timeout, TimeoutError)):
        return _deadline(str(exc) or type(exc).__name__, context, None)
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, socket.gaierror) or "dns" in type(exc).__name__.lower():
        return _connection("dns", f"cannot resolve the host ({detail})", context)
    if isinstance(exc, ssl.SSLError) or "ssl" in type(exc).__name__.lower():
        return _connection("tls", f"TLS failed ({detail})", context)
    if isinstance(exc, ConnectionRefusedError) or "connector" in type(exc).__name__.lower():
        return _connection("connection_refused", f"connection refused ({detail})", context)
    if isinstance(exc, (ConnectionError, EOFError)) or (
        isinstance(exc, OSError) and "disconnect" in type(exc).__name__.lower()
    ):
        return _connection("connection_lost", f"connection lost ({detail})", context)
    if type(exc).__name__ == "ServerDisconnectedError":  # aiohttp
        return _connection("connection_lost", f"connection lost ({detail})", context)
    return None


def _server_error(raw: str, message: str, context: CallContext) -> TritonClientError:
    status = normalise_status(raw)
    lowered = message.lower()
    kwargs = {"url": context.url, "model": context.model, "raw_status": raw or None}
    where = context.prefix()
    for hint, reason in _OVERLOAD_HINTS.items():
        if hint in lowered:
            return ServerOverloadedError(
                f"{where}: server overloaded, retry later ({message})",
                status,
                reason=reason,
                **kwargs,
            )
    if (
        status == "DEADLINE_EXCEEDED"
        or "deadline exceeded" in lowered
        or (
            status is None and "timed out" in lowered  # tritonclient's HTTP timeouts
        )
    ):
        return _deadline(message, context, raw or None)
    if status in {"UNAVAILABLE", "UNKNOWN", "INTERNAL", None} or raw == "":
        connection = _grpc_connection_reason(lowered)
        if connection is not None:
            return _connection(connection, message, context, status, raw or None)
    if any(hint in lowered for hint in _NOT_FOUND_HINTS) or status in {"NOT_FOUND", "UNAVAILABLE"}:
        return ModelUnavailableError(f"{where}: {message}", status, **kwargs)
    if status == "INVALID_ARGUMENT":
        return InvalidInputError(f"{where}: {message}", status, **kwargs)
    return ServerError(f"{where}: {message}", status, **kwargs)


def _grpc_connection_reason(lowered: str) -> str | None:
    if any(hint in lowered for hint in _DNS_HINTS):
        return "dns"
    if "failed to connect" in lowered or "connection refused" in lowered:
        return "connection_refused"
    if any(hint in lowered for hint in _LOST_HINTS):
        return "connection_lost"
    if any(hint in lowered for hint in _TLS_HINTS):
        return "tls"
    return None


def _deadline(detail: str, context: CallContext, raw: str | None) -> DeadlineExceededError:
    limit = f"its {context.timeout:g} s deadline" if context.timeout else "its deadline"
    error = DeadlineExceededError(
        f"{context.prefix()}: no answer within {limit} ({detail})",
        "DEADLINE_EXCEEDED",
        url=context.url,
        model=context.model,
    )
    error.raw_status = raw  # None when no protocol gave a status (a local timeout)
    return error


def _connection(
    reason: str,
    detail: str,
    context: CallContext,
    status: str | None = "UNAVAILABLE",
    raw: str | None = None,
) -> ServerConnectionError:
    error = ServerConnectionError(
        f"cannot reach {context.url}: {detail}",
        status or "UNAVAILABLE",
        reason=reason,
        url=context.url,
        model=context.model,
    )
    error.raw_status = raw  # None when no protocol gave a status (a socket, DNS or TLS error)
    return error


def not_ready(url: str, timeout: float) -> DeadlineExceededError:
    """``wait_until_ready`` ran out of time: the client's own limit, so no ``raw_status``."""
    error = DeadlineExceededError(
        f"{url} not ready within {timeout:g} s", "DEADLINE_EXCEEDED", url=url
    )
    error.raw_status = None
    return error
