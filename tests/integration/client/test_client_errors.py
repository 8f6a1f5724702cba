"""Every client error class, on both protocols and both twins, against the real server.

Assertions are on the exception classes (the SDK's contract), not on message wording.
"""

from __future__ import annotations

import socket

import pytest

from tests.support.prerequisites import require_models
from triton_kit.client import (
    AsyncTritonClient,
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    ServerError,
    TritonClient,
    TritonClientError,
)
from triton_kit.client.transport import Endpoint

LONG_TEXT = " ".join(["seventy-seven thousand seven hundred seventy-seven"] * 8)
# A whole batch (the default nmt's max_batch_size) at beam 8: the C++ CTranslate2 default
# translated one long sentence inside 2 ms about one run in three.
SLOW_BATCH = [LONG_TEXT] * 32
TOO_SHORT_S = 0.002  # 32 long sentences at beam 8 take tens of milliseconds


@pytest.fixture(scope="module", autouse=True)
def _models() -> None:
    require_models("nmt", "resnet50")


def _refused_url(protocol: str) -> str:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"{protocol}://127.0.0.1:{port}"


def test_timeout_is_deadline_exceeded(server_url: str) -> None:
    with TritonClient(server_url) as triton:
        with pytest.raises(DeadlineExceededError) as raised:
            triton.translate(SLOW_BATCH, beam_size=8, timeout=TOO_SHORT_S)
        assert isinstance(raised.value, TimeoutError)
        assert triton.translate("seven", timeout=60) == ["sept"]


async def test_async_timeout_is_deadline_exceeded(server_url: str) -> None:
    client = AsyncTritonClient(server_url)
    try:
        with pytest.raises(DeadlineExceededError):
            await client.translate(SLOW_BATCH, beam_size=8, timeout=TOO_SHORT_S)
        assert await client.translate("seven", timeout=60) == ["sept"]
    finally:
        await client.close()


def test_unknown_model_is_model_unavailable(server_url: str) -> None:
    with TritonClient(server_url, timeout=30, models={"translate": "no_such_model"}) as triton:
        with pytest.raises(ModelUnavailableError):
            triton.translate("seven")
        assert triton.model_ready("no_such_model") is False


async def test_async_unknown_model_is_model_unavailable(server_url: str) -> None:
    client = AsyncTritonClient(server_url, timeout=30, models={"translate": "no_such_model"})
    try:
        with pytest.raises(ModelUnavailableError):
            await client.translate("seven")
    finally:
        await client.close()


def test_bad_input_is_invalid_input(server_url: str) -> None:
    with TritonClient(server_url, timeout=30) as triton, pytest.raises(InvalidInputError):
        triton.translate("seven", beam_size=0)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_refused_connection_is_server_error(protocol: str) -> None:
    triton = TritonClient(_refused_url(protocol), timeout=5)
    with triton, pytest.raises(ServerError) as raised:
        triton.translate("seven")
    assert not isinstance(raised.value, (InvalidInputError, DeadlineExceededError))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
async def test_async_refused_connection_is_server_error(protocol: str) -> None:
    client = AsyncTritonClient(_refused_url(protocol), timeout=5)
    try:
        with pytest.raises(ServerError):
            await client.translate("seven")
    finally:
        await client.close()


def test_wait_until_ready_times_out_on_a_missing_model(server_url: str) -> None:
    with TritonClient(server_url, timeout=5) as triton:
        with pytest.raises(DeadlineExceededError):
            triton.wait_until_ready(timeout=0.6, models=["no_such_model"])
        triton.wait_until_ready(timeout=5, models=["nmt"])


def test_every_error_derives_from_the_base() -> None:
    for cls in (DeadlineExceededError, ModelUnavailableError, ServerError, InvalidInputError):
        assert issubclass(cls, TritonClientError)
    assert issubclass(InvalidInputError, ValueError)


@pytest.mark.parametrize(
    ("url", "protocol", "address", "ssl"),
    [
        ("grpc://h:9001", "grpc", "h:9001", False),
        ("grpc://h", "grpc", "h:8001", False),
        ("grpcs://h", "grpc", "h:8001", True),
        ("http://h", "http", "h:8000", False),
        ("HTTP://h:81", "http", "h:81", False),
        ("https://h", "http", "h:443", True),
        ("https://h:8443", "http", "h:8443", True),
        ("h:8000", "http", "h:8000", False),
    ],
)
def test_endpoint_parse(url: str, protocol: str, address: str, ssl: bool) -> None:
    endpoint = Endpoint.parse(url)
    assert (endpoint.protocol, endpoint.address, endpoint.ssl) == (protocol, address, ssl)


def test_endpoint_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="scheme"):
        Endpoint.parse("ftp://h:21")
