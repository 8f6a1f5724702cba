"""The front door (item 10): nginx refuses oversized requests before Triton reads them.

Triton 2.51 has no request-size cap (test_request_size.py), so every byte of an oversized
request lands in the python stub's shared-memory region, which never shrinks. Here a real
nginx (Debian's), configured from the template the deployment uses
(deploy/nginx/templates/default.conf.template, rendered as the nginx image renders it), sits
in front of the embedded Triton on free loopback ports: the same oversized requests are
refused at the door over HTTP and gRPC, and the region does not grow.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.integration.reliability import test_request_size as sizes
from tests.integration.reliability.test_request_size import (
    LIMIT,
    OVERSIZED,
    TOLERANCE,
    _rejected_oversized,
)
from tests.support.nginx import configure
from triton_kit.server import TritonServer, free_ports
from triton_kit.server import front_door as template

pytestmark = pytest.mark.reliability
gate_server = sizes.gate_server  # the fixture: a python model that rejects DATA over LIMIT
# The test's cap: over the gate model's own 1 MiB, far under the 40 MiB requests.
CAP = "2m"
TOO_LARGE = f"request body is larger than the front door's limit of {CAP}"


class FrontDoor:
    """nginx on two loopback ports in front of ``server``."""

    def __init__(self, http_port: int, grpc_port: int) -> None:
        self.http = f"127.0.0.1:{http_port}"
        self.grpc = f"127.0.0.1:{grpc_port}"


def _wait_listening(addresses: list[str], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    for address in addresses:
        host, port = address.rsplit(":", 1)
        while True:
            assert process.poll() is None, f"nginx exited:\n{log.read_text()}"
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"nginx not listening on {address}"
                time.sleep(0.1)


def test_the_compose_settings_render_to_a_config_nginx_accepts(tmp_path: Path) -> None:
    """DEFAULTS are docker-compose.yml's values (tests/build/deploy/test_compose.py checks that)."""
    configure(tmp_path / "nginx", template.render(template.DEFAULTS))


@pytest.fixture
def front_door(gate_server: TritonServer, tmp_path: Path) -> Iterator[FrontDoor]:
    http_port, grpc_port = free_ports(2)
    values = {
        **template.DEFAULTS,
        "TRITON_KIT_MAX_REQUEST_BODY": CAP,
        "FRONT_HTTP_LISTEN": f"127.0.0.1:{http_port}",
        "FRONT_GRPC_LISTEN": f"127.0.0.1:{grpc_port}",
        "TRITON_HTTP_UPSTREAM": gate_server.http_url.removeprefix("http://"),
        "TRITON_GRPC_UPSTREAM": gate_server.grpc_url.removeprefix("grpc://"),
    }
    root = tmp_path / "nginx"
    args = configure(root, template.render(values))
    process = subprocess.Popen(args)
    try:
        door = FrontDoor(http_port, grpc_port)
        _wait_listening([door.http, door.grpc], process, root / "error.log")
        yield door
    finally:
        process.terminate()
        process.wait(timeout=15)


def _data(module: ModuleType, size: int) -> Any:
    data = module.InferInput("DATA", [1], "BYTES")
    data.set_data_from_numpy(np.array([b"x" * size], dtype=np.object_))
    return data


def _http_size(address: str, size: int) -> int:
    with httpclient.InferenceServerClient(address, network_timeout=60) as client:
        return int(client.infer("gate", [_data(httpclient, size)]).as_numpy("SIZE")[0])


def _grpc_size(address: str, size: int) -> int:
    with grpcclient.InferenceServerClient(address) as client:
        result = client.infer("gate", [_data(grpcclient, size)], client_timeout=60)
        return int(result.as_numpy("SIZE")[0])


def test_legitimate_requests_pass_through_both_protocols(
    front_door: FrontDoor, gate_server: TritonServer
) -> None:
    for size in (1000, LIMIT):  # LIMIT: the largest the model accepts, under the cap
        assert _http_size(front_door.http, size) == size
        assert _grpc_size(front_door.grpc, size) == size
    assert gate_server.is_ready()


def _refused_over_http(front_door: FrontDoor) -> None:
    with pytest.raises(InferenceServerException) as caught:
        _http_size(front_door.http, OVERSIZED)
    assert caught.value.status() == "413", caught.value
    assert TOO_LARGE in caught.value.message(), caught.value


def _refused_over_grpc(front_door: FrontDoor) -> None:
    with pytest.raises(InferenceServerException) as caught:
        _grpc_size(front_door.grpc, OVERSIZED)
    assert caught.value.status() == "StatusCode.RESOURCE_EXHAUSTED", caught.value
    assert TOO_LARGE in caught.value.message(), caught.value


def _refused_chunked_over_http(front_door: FrontDoor) -> None:
    """A body with no Content-Length (tritonclient always sends one) is counted as it comes."""
    body = json.dumps(
        {"inputs": [{"name": "DATA", "shape": [1], "datatype": "BYTES", "data": ["x" * OVERSIZED]}]}
    ).encode()
    chunks = (body[i : i + (1 << 20)] for i in range(0, len(body), 1 << 20))
    host, port = front_door.http.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    # nginx may answer and stop reading before the last chunk; the answer is still there.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        connection.request("POST", "/v2/models/gate/infer", body=chunks)
    response = connection.getresponse()
    assert response.status == 413, response.read()
    assert TOO_LARGE in json.loads(response.read())["error"]
    connection.close()


@pytest.mark.parametrize(
    "refuse", [_refused_over_http, _refused_chunked_over_http, _refused_over_grpc]
)
def test_oversized_requests_are_refused_and_do_not_grow_the_stub_region(
    front_door: FrontDoor, gate_server: TritonServer, refuse: Callable[[FrontDoor], None]
) -> None:
    """The assertion of test_request_size's xfail, passing through the front door."""
    growth = _rejected_oversized(gate_server, lambda _server: refuse(front_door))
    assert growth["region"] < TOLERANCE, f"region grew by {growth['region'] >> 20} MiB"
    assert gate_server.is_ready()
    assert _http_size(front_door.http, 1000) == 1000, "the door stays open after refusing"
    assert _grpc_size(front_door.grpc, 1000) == 1000
