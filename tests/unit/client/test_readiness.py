"""wait_until_ready and model_metadata of both twins, without Triton (fast: mutation runs).

A closed loopback port gives the "never ready" case for real on both protocols. For the
"becomes ready" case, STAND-IN SERVER ON PURPOSE: a stdlib HTTP server answers Triton's
HTTP readiness and metadata endpoints (KServe v2 paths) and turns the model ready on its
third poll, which a real Triton cannot be made to do on cue.
tests/integration/client/test_sdk_server.py checks the same calls against the real server.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from triton_kit.client import AsyncTritonClient, DeadlineExceededError, TritonClient
from triton_kit.server import free_port

METADATA = {
    "name": "bert",
    "versions": ["1"],
    "platform": "ensemble",
    "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1, 1]}],
    "outputs": [{"name": "EMBEDDING", "datatype": "FP32", "shape": [-1, 384]}],
}


class Triton(BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []
    ready_after: ClassVar[int] = 3  # the model answers ready from this poll on

    def do_GET(self) -> None:
        Triton.paths.append(self.path)
        polls = Triton.paths.count(self.path)
        if self.path == "/v2/health/ready":
            self._reply(200, b"")
        elif self.path == "/v2/models/bert/ready":
            self._reply(200 if polls >= Triton.ready_after else 400, b"")
        elif self.path in ("/v2/models/bert", "/v2/models/bert/versions/2"):
            self._reply(200, json.dumps(METADATA).encode())
        else:
            self._reply(404, json.dumps({"error": "unknown"}).encode())

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    Triton.paths = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Triton)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _ready_async(url: str, timeout: float, models: list[str]) -> None:
    async def main() -> None:
        client = AsyncTritonClient(url)
        try:
            await client.wait_until_ready(timeout=timeout, models=models)
        finally:
            await client.close()

    asyncio.run(main())


def _ready_sync(url: str, timeout: float, models: list[str]) -> None:
    with TritonClient(url) as client:
        client.wait_until_ready(timeout=timeout, models=models)


TWINS = {"sync": _ready_sync, "async": _ready_async}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("twin", ["sync", "async"])
def test_nothing_listening_is_a_deadline_naming_url_and_limit(protocol: str, twin: str) -> None:
    url = f"{protocol}://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError) as caught:
        TWINS[twin](url, 0.6, [])
    elapsed = time.monotonic() - started
    assert str(caught.value) == f"{url} not ready within 0.6 s"
    assert caught.value.status == "DEADLINE_EXCEEDED" and caught.value.url == url
    assert caught.value.raw_status is None  # a local limit: no protocol gave a status
    assert 0.6 <= elapsed < 2.0, elapsed


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_waits_until_the_model_is_ready(stand_in: str, twin: str) -> None:
    started = time.monotonic()
    TWINS[twin](stand_in, 10.0, ["bert"])
    elapsed = time.monotonic() - started
    # ready on the third poll: two pauses of 0.25 s between polls
    assert 0.5 <= elapsed < 3.0, elapsed
    assert Triton.paths == ["/v2/health/ready", "/v2/models/bert/ready"] * 3


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_model_that_stays_unready_is_a_deadline(stand_in: str, twin: str) -> None:
    Triton.ready_after = 10_000
    try:
        with pytest.raises(DeadlineExceededError, match=r"not ready within 0\.7 s$"):
            TWINS[twin](stand_in, 0.7, ["bert"])
    finally:
        Triton.ready_after = 3
    polls = Triton.paths.count("/v2/models/bert/ready")
    assert 2 <= polls <= 4, polls  # every 0.25 s for 0.7 s


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_server_only_readiness_asks_for_no_model(stand_in: str, twin: str) -> None:
    TWINS[twin](stand_in, 5.0, [])
    assert Triton.paths == ["/v2/health/ready"]


def test_model_metadata_of_both_twins(stand_in: str) -> None:
    with TritonClient(stand_in) as client:
        assert client.model_metadata("bert") == METADATA
        assert client.model_metadata("bert", version=2, timeout=3.0) == METADATA

    async def main() -> dict:
        client = AsyncTritonClient(stand_in)
        try:
            return await client.model_metadata("bert", version="2")
        finally:
            await client.close()

    assert asyncio.run(main()) == METADATA
    assert Triton.paths == [
        "/v2/models/bert",
        "/v2/models/bert/versions/2",
        "/v2/models/bert/versions/2",
    ]
