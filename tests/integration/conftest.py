"""One real Triton server per test session, serving model_repository/ on free loopback ports."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from server import ServerConfig, TritonServer

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MODEL_REPOSITORY = Path(os.environ.get("MODEL_REPOSITORY", PROJECT_ROOT / "model_repository"))


def require_models(*names: str) -> None:
    """Fail (not skip) when a model the test needs was not built: `make test` builds them."""
    missing = [n for n in names if not (MODEL_REPOSITORY / n / "config.pbtxt").exists()]
    if missing:
        pytest.fail(
            f"models {missing} are not in {MODEL_REPOSITORY}; run `make models` "
            "(make test does this first)"
        )


def require_tool(name: str) -> str:
    """Path of an installed tool; skip with the install hint, or fail under CI."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found:
        return found
    message = f"{name} is not installed: run `bash scripts/install-system-deps.sh`"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must run it before the tests)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def model_repository() -> Path:
    return MODEL_REPOSITORY


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
    from client import TritonClient

    with TritonClient(server_url, timeout=120) as client:
        yield client


@pytest.fixture
async def async_triton_client(server_url: str):
    from client import AsyncTritonClient

    client = AsyncTritonClient(server_url, timeout=120)
    yield client
    await client.close()
