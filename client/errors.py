"""One exception hierarchy for both protocols, and the one place that maps to it."""

from __future__ import annotations

import asyncio
import socket


class TritonClientError(Exception):
    """Base class: every error the SDK raises derives from it."""

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class InvalidInputError(TritonClientError, ValueError):
    """The server rejected the request's content (INVALID_ARGUMENT / HTTP 400)."""


class ModelUnavailableError(TritonClientError):
    """The model is unknown, not loaded, or not ready."""


class DeadlineExceededError(TritonClientError, TimeoutError):
    """The call did not finish within its timeout."""


class ServerError(TritonClientError):
    """The server failed, or could not be reached."""


_UNAVAILABLE_HINTS = ("unknown model", "is not found", "is not ready", "no loaded version")


def translate_error(exc: BaseException) -> TritonClientError:
    """Map tritonclient, gRPC, HTTP and timeout errors to this hierarchy."""
    if isinstance(exc, TritonClientError):
        return exc
    if isinstance(exc, (asyncio.TimeoutError, socket.timeout, TimeoutError)):
        return DeadlineExceededError(f"request timed out: {exc or type(exc).__name__}")
    from tritonclient.utils import InferenceServerException

    if not isinstance(exc, InferenceServerException):
        name = type(exc).__name__
        if "timeout" in name.lower():
            return DeadlineExceededError(f"request timed out ({name})")
        return ServerError(f"{name}: {exc}")
    status = str(exc.status() or "")
    message = exc.message() or str(exc)
    lowered = message.lower()
    if "DEADLINE_EXCEEDED" in status or "deadline exceeded" in lowered or "timed out" in lowered:
        return DeadlineExceededError(message, status)
    if any(hint in lowered for hint in _UNAVAILABLE_HINTS) or status in {
        "StatusCode.NOT_FOUND",
        "StatusCode.UNAVAILABLE",
        "404",
        "503",
    }:
        if status == "StatusCode.UNAVAILABLE" and "connect" in lowered:
            return ServerError(message, status)
        return ModelUnavailableError(message, status)
    if status in {"StatusCode.INVALID_ARGUMENT", "400"}:
        return InvalidInputError(message, status)
    return ServerError(message, status)
