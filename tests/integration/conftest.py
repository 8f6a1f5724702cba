"""Tests against a real Triton: every test here is marked ``server``.

One real Triton server per test session, serving model_repository/ on free loopback ports.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.server import ServerConfig, TritonServer

INTEGRATION = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration/ ``server`` (deselect with ``-m 'not server'``)."""
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.server)


@pytest.fixture(scope="session")
def triton_server(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    """Started once; every test talks to it. The log goes to a temp file, quoted on failure."""
    log_file = tmp_path_factory.mktemp("triton") / "tritonserver.log"
    config = ServerConfig(
        model_repository=model_repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=log_file,
    )
    with TritonServer(config) as server:
        yield server
        if os.environ.get("KEEP_TRITON_LOG"):
            shutil.copy(log_file, PROJECT_ROOT / "logs" / "test-session.log")


@pytest.fixture(params=["grpc", "http"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def server_url(triton_server: TritonServer, protocol: str) -> str:
    return triton_server.grpc_url if protocol == "grpc" else triton_server.http_url


@pytest.fixture
def triton_client(server_url: str) -> Iterator[object]:
    from triton_kit.client import TritonClient

    with TritonClient(server_url, timeout=120) as client:
        yield client


@pytest.fixture
async def async_triton_client(server_url: str):
    from triton_kit.client import AsyncTritonClient

    client = AsyncTritonClient(server_url, timeout=120)
    yield client
    await client.close()
