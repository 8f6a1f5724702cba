"""The SDK's error mapping, retries and pass-through options, branch by branch, with no server.

MOCKED ON PURPOSE: a fake tritonclient client (injected through ``client_factory``)
raises the exact exceptions tritonclient, grpc, geventhttpclient and aiohttp raise, so
every branch of ``triton_kit.client.errors.translate_error`` and the retry loop runs here; the real
server cannot be made to produce most of them on demand (DNS, TLS, queue full, lost
streams). tests/integration/client/test_sdk_server.py checks the same contract against the
real Triton.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import time
import warnings
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.support.shm_regions import own_regions
from triton_kit.client import (
    AsyncTritonClient,
    ClientClosedError,
    ConfigurationError,
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    Retry,
    ServerConnectionError,
    ServerError,
    ServerOverloadedError,
    TritonClient,
    TritonClientError,
)
from triton_kit.client.shm import UNREGISTER_WAIT_S, unregister_pauses

URL = {"grpc": "grpc://10.9.8.7:8001", "http": "http://10.9.8.7:8000"}
EMBEDDING = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)


class FakeResult:
    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    def as_numpy(self, name: str) -> np.ndarray:
        return self.arrays[name]


class FakeTritonClient:
    """Plays back a script: each call takes the next item (raise it, or return it)."""

    def __init__(self, script: list[Any], calls: list[tuple[str, dict]]) -> None:
        self.script = script
        self.calls = calls

    def _next(self, name: str, kwargs: dict) -> Any:
        self.calls.append((name, kwargs))
        item = self.script.pop(0) if self.script else FakeResult({"EMBEDDING": EMBEDDING})
        if isinstance(item, BaseException):
            raise item
        return item

    def infer(self, model: str, inputs: list, outputs: Any = None, **kwargs: Any) -> Any:
        return self._next("infer", {"model": model, "inputs": inputs, **kwargs})

    def is_server_ready(self, **kwargs: Any) -> Any:
        return self._next("is_server_ready", kwargs)

    def is_model_ready(self, model: str, version: str = "", **kwargs: Any) -> Any:
        return self._next("is_model_ready", {"model": model, "version": version, **kwargs})

    def register_system_shared_memory(self, name: str, key: str, size: int, **kwargs: Any) -> None:
        self.calls.append(("register_system_shared_memory", {"size": size, **kwargs}))

    def unregister_system_shared_memory(self, name: str = "", **kwargs: Any) -> None:
        self.calls.append(("unregister_system_shared_memory", kwargs))

    def close(self) -> None:
        pass


class AsyncFake(FakeTritonClient):
    async def infer(self, model: str, inputs: list, outputs: Any = None, **kwargs: Any) -> Any:
        return super().infer(model, inputs, outputs, **kwargs)

    async def is_server_ready(self, **kwargs: Any) -> Any:
        return super().is_server_ready(**kwargs)

    async def close(self) -> None:
        pass


def make(protocol: str, script: list[Any], **options: Any) -> tuple[TritonClient, list]:
    calls: list[tuple[str, dict]] = []
    options.setdefault("retry", Retry(attempts=3, backoff=0.001, max_backoff=0.002))
    client = TritonClient(
        URL[protocol],
        client_factory=lambda spec: FakeTritonClient(script, calls),
        **options,
    )
    return client, calls


def ise(message: str, status: str) -> InferenceServerException:
    return InferenceServerException(msg=message, status=status)


GRPC_REFUSED = "failed to connect to all addresses; last error: UNKNOWN: Connection refused"
# (protocol, raised, expected class, normalised status, reason)
BRANCHES = [
    ("grpc", ise("bad UTF-8", "StatusCode.INVALID_ARGUMENT"), InvalidInputError,
     "INVALID_ARGUMENT", "invalid_input"),
    ("http", ise("bad UTF-8", "400"), InvalidInputError, "INVALID_ARGUMENT", "invalid_input"),
    ("grpc", ise("Request for unknown model: 'x' is not found", "StatusCode.NOT_FOUND"),
     ModelUnavailableError, "NOT_FOUND", "model_unavailable"),
    ("http", ise("Request for unknown model: 'x' is not found", "400"),
     ModelUnavailableError, "INVALID_ARGUMENT", "model_unavailable"),
    ("grpc", ise("Exceeds maximum queue size", "StatusCode.UNAVAILABLE"),
     ServerOverloadedError, "UNAVAILABLE", "queue_full"),
    ("http", ise("Request timeout expired", "503"), ServerOverloadedError, "UNAVAILABLE",
     "queue_timeout"),
    ("grpc", ise("Deadline Exceeded", "StatusCode.DEADLINE_EXCEEDED"), DeadlineExceededError,
     "DEADLINE_EXCEEDED", "deadline"),
    ("http", TimeoutError("timed out"), DeadlineExceededError, "DEADLINE_EXCEEDED", "deadline"),
    ("grpc", ise(GRPC_REFUSED, "StatusCode.UNAVAILABLE"), ServerConnectionError,
     "UNAVAILABLE", "connection_refused"),
    ("http", ConnectionRefusedError(111, "Connection refused"), ServerConnectionError,
     "UNAVAILABLE", "connection_refused"),
    ("grpc", ise("Stream removed", "StatusCode.UNKNOWN"), ServerConnectionError, "UNKNOWN",
     "connection_lost"),
    ("http", ConnectionResetError(104, "reset by peer"), ServerConnectionError, "UNAVAILABLE",
     "connection_lost"),
    ("grpc", ise("DNS resolution failed for nohost:8001", "StatusCode.UNAVAILABLE"),
     ServerConnectionError, "UNAVAILABLE", "dns"),
    ("http", socket.gaierror(-2, "Name or service not known"), ServerConnectionError,
     "UNAVAILABLE", "dns"),
    ("http", ssl.SSLError(1, "CERTIFICATE_VERIFY_FAILED"), ServerConnectionError,
     "UNAVAILABLE", "tls"),
    ("grpc", ise("Model 'x' is not ready", "StatusCode.UNAVAILABLE"), ModelUnavailableError,
     "UNAVAILABLE", "model_unavailable"),
    ("grpc", ise("boom in execute", "StatusCode.INTERNAL"), ServerError, "INTERNAL",
     "server_error"),
    ("http", ise("boom in execute", "500"), ServerError, "INTERNAL", "server_error"),
    ("http", RuntimeError("weird"), ServerError, None, "server_error"),
]  # fmt: skip


@pytest.mark.parametrize(("protocol", "raised", "cls", "status", "reason"), BRANCHES)
def test_every_failure_maps_to_one_class_status_and_reason(
    protocol: str, raised: BaseException, cls: type, status: str | None, reason: str
) -> None:
    client, calls = make(protocol, [raised] * 5, timeout=2.5)
    with pytest.raises(cls) as caught:
        client.embed("x")
    error = caught.value
    assert type(error) is cls, type(error)
    assert isinstance(error, TritonClientError)
    assert error.status == status
    assert error.reason == reason
    assert error.url == URL[protocol].split("//")[0] + "//10.9.8.7:" + URL[protocol][-4:]
    assert "10.9.8.7" in str(error), str(error)  # every message names where the call went
    assert not str(error).startswith("item 0"), "a single call has no item prefix"
    assert error.request_id is None  # ids are sent only when asked for (infer(request_id=))
    if cls is DeadlineExceededError:
        assert "2.5 s" in str(error), "a timeout names its limit"
    expected_attempts = 3 if error.retryable else 1
    assert len([c for c in calls if c[0] == "infer"]) == expected_attempts


def test_stable_base_classes_are_kept() -> None:
    assert issubclass(ServerConnectionError, ServerError)
    assert issubclass(ServerConnectionError, ConnectionError)
    assert issubclass(ServerOverloadedError, ModelUnavailableError)
    assert issubclass(DeadlineExceededError, TimeoutError)
    assert issubclass(InvalidInputError, ValueError)
    for cls in (ClientClosedError, ConfigurationError, ServerOverloadedError):
        assert issubclass(cls, TritonClientError)


def test_retry_recovers_after_connection_failures_and_can_be_turned_off() -> None:
    refused = ise(GRPC_REFUSED, "StatusCode.UNAVAILABLE")
    client, calls = make("grpc", [refused, refused])
    assert client.embed("x").shape == (1, 8)
    assert len(calls) == 3
    client, calls = make("grpc", [refused], retry=0)
    with pytest.raises(ServerConnectionError):
        client.embed("x")
    assert len(calls) == 1


def test_retries_stop_at_the_calls_deadline() -> None:
    refused = ise(GRPC_REFUSED, "StatusCode.UNAVAILABLE")
    client, calls = make(
        "grpc", [refused] * 50, timeout=0.3, retry=Retry(attempts=50, backoff=0.05, max_backoff=0.1)
    )
    started = time.monotonic()
    with pytest.raises(ServerConnectionError):
        client.embed("x")
    assert time.monotonic() - started < 0.35
    assert 1 < len(calls) < 50
    # each attempt gets what is left of the deadline, never more
    budgets = [kwargs["client_timeout"] for _, kwargs in calls]
    assert all(b <= 0.3 for b in budgets) and budgets == sorted(budgets, reverse=True)


def test_non_idempotent_generic_infer_is_not_retried() -> None:
    client, calls = make("grpc", [ise("Exceeds maximum queue size", "StatusCode.UNAVAILABLE")])
    with pytest.raises(ServerOverloadedError) as caught:
        client.infer(
            "seq", {"X": np.zeros((1, 1), np.float32)}, ["Y"], idempotent=False, request_id="r7"
        )
    assert len(calls) == 1
    assert caught.value.request_id == "r7" and calls[0][1]["request_id"] == "r7"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_options_reach_tritonclient(protocol: str) -> None:
    client, calls = make(
        protocol,
        [FakeResult({"Y": np.ones((1, 1), np.float32)})],
        headers={"Authorization": "Bearer t"},
        versions={"m": 3},
        compression="gzip",
        timeout=7,
    )
    out = client.infer("m", {"X": np.zeros((1, 1), np.float32)}, ["Y"], request_id="abc")
    assert out["Y"].tolist() == [[1.0]]
    (_, kwargs), *_ = calls
    assert kwargs["headers"] == {"Authorization": "Bearer t"}
    assert kwargs["model_version"] == "3" and kwargs["request_id"] == "abc"
    assert 6.9 < kwargs["timeout"] / 1e6 <= 7, "the deadline reaches Triton's queue"
    if protocol == "grpc":
        assert kwargs["compression_algorithm"] == "gzip" and 6.9 < kwargs["client_timeout"] <= 7
    else:
        assert kwargs["request_compression_algorithm"] == "gzip"


async def test_async_grpc_sends_the_deadline_to_the_server() -> None:
    calls: list = []
    client = AsyncTritonClient(
        URL["grpc"], timeout=4, client_factory=lambda spec: AsyncFake([], calls)
    )
    await client.embed("x")
    assert 3.9 < calls[0][1]["client_timeout"] <= 4
    await client.close()
    with pytest.raises(ClientClosedError):
        await client.embed("x")


def test_system_shared_memory_registers_with_headers_and_releases_on_close() -> None:
    client, calls = make("http", [], shared_memory="system", shared_memory_threshold=0,
                         headers={"triton-access-key": "k"})  # fmt: skip
    client.embed("a sentence long enough")
    client.embed("short")  # fits the same region: no second registration
    names = [name for name, _ in calls]
    assert names.count("register_system_shared_memory") == 1
    register = dict(calls)["register_system_shared_memory"]
    assert register["headers"] == {"triton-access-key": "k"}
    client.close()
    assert [name for name, _ in calls][-1] == "unregister_system_shared_memory"


IN_USE = "Cannot unregister shared memory region 'r', it is currently in use."


class RefusingUnregister(FakeTritonClient):
    """Refuses the first ``refusals`` unregisters with ``error`` (Triton's "in use" by default)."""

    def __init__(self, calls: list, refusals: int, error: str = IN_USE) -> None:
        super().__init__([], calls)
        self.refusals, self.error = refusals, error

    def unregister_system_shared_memory(self, name: str = "", **kwargs: Any) -> None:
        super().unregister_system_shared_memory(name, **kwargs)
        if self.refusals:
            self.refusals -= 1
            raise ise(self.error, "StatusCode.INTERNAL")


def _closed_after(refusals: int, error: str = IN_USE) -> int:
    calls: list = []
    fake = RefusingUnregister(calls, refusals, error)
    client = TritonClient(
        URL["grpc"], shared_memory="system", shared_memory_threshold=0,
        client_factory=lambda spec: fake,
    )  # fmt: skip
    client.embed("a sentence")
    client.close()
    assert not own_regions(), "the local region outlives close()"
    return [name for name, _ in calls].count("unregister_system_shared_memory")


def test_close_waits_out_a_region_still_in_use() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        assert _closed_after(refusals=2) == 3


def test_close_warns_when_the_server_never_lets_the_region_go() -> None:
    with pytest.warns(ResourceWarning, match="still registered on the server"):
        attempts = _closed_after(refusals=10_000)
    assert 5 <= attempts <= 12  # 0, 5 ms, 10 ms ... within triton_kit/client/shm.UNREGISTER_WAIT_S


def test_close_does_not_retry_other_unregister_failures() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        assert _closed_after(refusals=1, error="failed to connect to all addresses") == 1


def test_unregister_pauses_double_within_the_budget() -> None:
    pauses = list(unregister_pauses())
    assert pauses[:3] == [0.0, 0.005, 0.01]
    assert all(b == 2 * a for a, b in itertools.pairwise(pauses[1:]))
    assert sum(pauses) <= UNREGISTER_WAIT_S < sum(pauses) + 2 * pauses[-1]


def test_readiness_is_false_only_while_the_server_is_not_up() -> None:
    client, _ = make("grpc", [ise(GRPC_REFUSED, "StatusCode.UNAVAILABLE")])
    assert client.server_ready(timeout=1) is False
    client, _ = make("grpc", [ise("DNS resolution failed for x", "StatusCode.UNAVAILABLE")])
    with pytest.raises(ServerConnectionError, match=r"10\.9\.8\.7"):
        client.server_ready(timeout=1)
    client, _ = make("http", [ssl.SSLError(1, "WRONG_VERSION_NUMBER")])
    with pytest.raises(ServerConnectionError) as caught:
        client.model_ready("bert", timeout=1)
    assert caught.value.reason == "tls"


def test_local_mistakes_raise_sdk_errors_before_sending(tmp_path: Any) -> None:
    client, calls = make("grpc", [])
    with pytest.raises(InvalidInputError, match="top_k"):
        client.classify(b"img", top_k=10)
    with pytest.raises(InvalidInputError, match="ndarray"):
        client.classify(np.zeros((2, 2)))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="beam_size"):
        client.translate("x", beam_size=2**32 + 1)
    with pytest.raises(InvalidInputError, match="max_length"):
        client.translate("x", max_length=2**32 + 3)
    missing = str(tmp_path / "missing.jpg")
    results = client.classify_batch([missing, missing], return_exceptions=True)
    assert all(isinstance(r, InvalidInputError) and "missing.jpg" in str(r) for r in results)
    assert calls == []
    with pytest.raises(ConfigurationError):
        TritonClient("ftp://x:1")
    with pytest.raises(ConfigurationError):
        TritonClient("grpc://x:1", compression="brotli")


def test_closed_client_refuses_calls() -> None:
    client, _ = make("grpc", [])
    client.close()
    with pytest.raises(ClientClosedError):
        client.embed("x")
    with pytest.raises(ClientClosedError):
        client.server_ready()
