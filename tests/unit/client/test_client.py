"""The SDK's error translation and small helpers, without a server (fast: mutation runs)."""

from __future__ import annotations

import asyncio

import pytest
from tritonclient.utils import InferenceServerException

from triton_kit.client import (
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    ServerError,
    Timeout,
    TritonClientError,
)
from triton_kit.client.base import as_list, raise_first
from triton_kit.client.errors import CallContext, translate_error

CONTEXT = CallContext(url="grpc://127.0.0.1:1", model="m", timeout=2.0)


def _server(message: str, status: str | None) -> InferenceServerException:
    return InferenceServerException(msg=message, status=status)


@pytest.mark.parametrize(
    ("message", "status", "expected"),
    [
        ("Deadline Exceeded", "StatusCode.DEADLINE_EXCEEDED", DeadlineExceededError),
        ("timed out", None, DeadlineExceededError),
        (
            "Request for unknown model: 'x' is not found",
            "StatusCode.NOT_FOUND",
            ModelUnavailableError,
        ),
        ("model 'x' is not ready", "503", ModelUnavailableError),
        ("failed to connect to all addresses", "StatusCode.UNAVAILABLE", ServerError),
        ("whatever", "StatusCode.UNAVAILABLE", ModelUnavailableError),
        ("bad shape", "StatusCode.INVALID_ARGUMENT", InvalidInputError),
        ("bad shape", "400", InvalidInputError),
        ("boom", "StatusCode.INTERNAL", ServerError),
        ("boom", "500", ServerError),
        # The status alone decides when the wording carries no hint.
        ("x", "StatusCode.DEADLINE_EXCEEDED", DeadlineExceededError),
        ("Deadline Exceeded", None, DeadlineExceededError),
        ("x", "StatusCode.NOT_FOUND", ModelUnavailableError),
        ("x", "404", ModelUnavailableError),
        ("x", "503", ModelUnavailableError),
        ("x", "StatusCode.INVALID_ARGUMENT", InvalidInputError),
    ],
)
def test_server_exceptions_map_to_the_hierarchy(message, status, expected) -> None:
    error = translate_error(_server(message, status), CONTEXT)
    assert type(error) is expected or isinstance(error, expected)
    assert isinstance(error, TritonClientError)
    assert message in str(error)
    if status:
        assert error.status, "the status must be kept (in whatever normalised form)"


@pytest.mark.parametrize("exc", [asyncio.TimeoutError(), TimeoutError("t"), TimeoutError()])
def test_python_timeouts_are_deadline_exceeded(exc: BaseException) -> None:
    error = translate_error(exc, CONTEXT)
    assert isinstance(error, DeadlineExceededError) and str(error)


def test_other_exceptions_are_server_errors_and_ours_pass_through() -> None:
    error = translate_error(ConnectionRefusedError("refused"), CONTEXT)
    assert isinstance(error, ServerError) and "refused" in str(error)
    ours = InvalidInputError("x")
    assert translate_error(ours, CONTEXT) is ours

    class ReadTimeout(Exception):
        pass

    assert isinstance(translate_error(ReadTimeout(), CONTEXT), DeadlineExceededError)


def test_timeout_of() -> None:
    default = Timeout(request=5.0, connect=2.0)
    assert Timeout.of(None, default) is default
    assert Timeout.of(3, default) == Timeout(request=3.0, connect=2.0)
    given = Timeout(request=1.0, connect=1.0)
    assert Timeout.of(given, default) is given
    assert Timeout() == Timeout(request=60.0, connect=10.0)


def test_as_list_and_raise_first() -> None:
    assert as_list("a") == (["a"], True) and as_list(b"a") == ([b"a"], True)
    assert as_list(("a", "b")) == (["a", "b"], False)
    assert raise_first([1, 2]) == [1, 2]
    with pytest.raises(InvalidInputError, match="item 1: bad"):
        raise_first([1, InvalidInputError("bad", "400"), ServerError("later")])
    with pytest.raises(KeyError):
        raise_first([1, KeyError("k")])
