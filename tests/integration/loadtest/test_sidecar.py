"""The Locust gRPC user's sidecar transport (triton_kit/loadtest/sidecar/server*.py) against
the real Triton.

Every check runs against both sidecars that speak the frames: the Python one
(triton_kit/loadtest/sidecar/server.py) and the native one (triton_kit/loadtest/sidecar/native,
built by scripts/build-native-sidecar.sh; its cases skip, naming the script, where it is not
built).

Locust and gevent run only in subprocesses (importing them would patch pytest). The
references are independent of the code under test: embeddings from tritonclient's own
gRPC client, errors from the SDK's default gRPC transport, processes from /proc.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from tests.integration.loadtest.test_loadtest import ROOT
from tests.support.prerequisites import require_models
from triton_kit.client import ServerConnectionError, TritonClient
from triton_kit.loadtest.sidecar import wire
from triton_kit.server import TritonServer

PROBE = "tests.integration.loadtest.sidecar_probe"
LOCUSTFILE = "tests/integration/loadtest/sidecar_locustfile.py"
TAG = "SIDECAR_TEST_TAG"
# Where scripts/build-native-sidecar.sh puts the native sidecar (named here, not imported:
# loadtest.sidecar.client would bring gevent into the pytest process).
NATIVE = Path(sys.prefix) / "bin" / "triton-kit-grpc-sidecar"


def _reference_embedding(server: TritonServer, text: str) -> np.ndarray:
    """Plain tritonclient, no SDK, no sidecar."""
    client = grpcclient.InferenceServerClient(server.grpc_url.split("://", 1)[1])
    try:
        tensor = grpcclient.InferInput("TEXT", [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[text.encode()]], dtype=np.object_))
        return client.infer("bert", [tensor]).as_numpy("EMBEDDING").reshape(-1)
    finally:
        client.close()


def _tagged_processes(tag: str) -> list[str]:
    """Live processes (zombies aside) whose environment carries ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if f"{TAG}={tag}".encode() in environ.split(b"\0") and state != "Z":
            found.append(f"{entry.name} {cmdline}")
    return found


@pytest.fixture(params=["python", "native"])
def kind(request: pytest.FixtureRequest) -> str:
    """Which sidecar the test drives; the native one only where it is built."""
    if request.param == "native" and not os.access(NATIVE, os.X_OK):
        pytest.skip(f"no native gRPC sidecar at {NATIVE}: run scripts/build-native-sidecar.sh")
    return str(request.param)


def _sidecar_command(kind: str, fd: int, address: str) -> list[str]:
    if kind == "native":
        return [str(NATIVE), "--fd", str(fd), "--address", address]
    return [
        sys.executable,
        "-m",
        "triton_kit.loadtest.sidecar.server",
        "--fd",
        str(fd),
        "--address",
        address,
    ]


@pytest.fixture
def probe(triton_server: TritonServer, kind: str) -> dict:
    require_models("bert")
    done = subprocess.run(
        [sys.executable, "-m", PROBE, triton_server.grpc_url, kind],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["native"] is (kind == "native"), out  # the sidecar asked for, not the other
    return out


def test_sdk_over_the_sidecar_matches_plain_tritonclient(
    probe: dict, triton_server: TritonServer
) -> None:
    assert probe["ready"] is True
    expected = _reference_embedding(triton_server, "A sentence for the sidecar.")
    np.testing.assert_allclose(np.array(probe["embedding"]).reshape(-1), expected, atol=1e-6)


def test_server_invalid_argument_is_the_same_sdk_error(
    probe: dict, triton_server: TritonServer
) -> None:
    """The SDK's default gRPC transport is the reference: same class, message and status."""
    client = TritonClient(triton_server.grpc_url, timeout=30, retry=0)
    try:
        with pytest.raises(Exception) as raised:
            client.infer("bert", {"NOT_AN_INPUT": np.zeros((1, 1), dtype=np.float32)})
    finally:
        client.close()
    assert "INVALID_ARG" in str(raised.value.status)
    assert probe["invalid"]["type"] == type(raised.value).__name__
    assert probe["invalid"]["message"] == str(raised.value)
    assert probe["invalid"]["status"] == str(raised.value.status)


def test_without_the_native_sidecar_the_python_one_serves_and_says_so(
    triton_server: TritonServer, tmp_path: Path
) -> None:
    """No binary (as on a machine without the build tools): the default falls back, loudly."""
    require_models("bert")
    env = {**os.environ, "TRITON_KIT_NATIVE_SIDECAR": str(tmp_path / "not-built")}
    command = [
        sys.executable,
        "-m",
        "tests.integration.loadtest.sidecar_probe",
        triton_server.grpc_url,
        "auto",
    ]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env, check=True
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ready"] is True and out["native"] is False, out
    assert "native gRPC sidecar not built" in done.stderr, done.stderr[-2000:]
    assert "scripts/build-native-sidecar.sh" in done.stderr, done.stderr[-2000:]
    forced = subprocess.run(
        [*command[:-1], "native"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert forced.returncode != 0
    assert f"no native gRPC sidecar at {tmp_path / 'not-built'}" in forced.stderr


def test_a_dead_sidecar_fails_calls_at_once_and_names_itself(probe: dict) -> None:
    """Killed under a call (60 s deadline): the call fails within seconds, as do later ones."""
    pid = probe["sidecar_pid"]
    for case in ("killed_in_flight", "after_death"):
        failure = probe[case]
        assert failure["type"] == ServerConnectionError.__name__, failure
        assert f"gRPC sidecar (pid {pid}) exited with code -9" in failure["message"], failure
        assert failure["seconds"] < 5.0, failure


@contextlib.contextmanager
def _locust(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """A Locust process group, tagged through its environment, that cannot outlive the test."""
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        "tests/integration/loadtest/sidecar_locustfile.py",
        *args,
    ]
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, env={**os.environ, **env},
        )  # fmt: skip
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


# --grpc-transport sidecar, the default, is the native sidecar wherever it is built.
TRANSPORTS = {"python": "sidecar-python", "native": "sidecar"}


def test_locust_grpc_run_returns_reference_outputs_and_leaves_no_process(
    triton_server: TritonServer, tmp_path: Path, kind: str
) -> None:
    """A real headless Locust run of the BertUser over gRPC through the ``kind`` sidecar."""
    require_models("bert")
    tag = uuid.uuid4().hex
    dump = tmp_path / "dump.json"
    args = ["--headless", "--host", triton_server.grpc_url, "-u", "4", "-r", "4"]
    args += ["--grpc-transport", TRANSPORTS[kind]]
    args += ["--run-time", "4s", "--only-summary", "--exit-code-on-error", "0"]
    env = {TAG: tag, "SIDECAR_TEST_DUMP": str(dump)}
    with _locust(args, tmp_path / "locust.log", env) as process:
        code = process.wait(timeout=60)
        left = _tagged_processes(tag)  # before the group is killed in teardown
    log = (tmp_path / "locust.log").read_text(errors="replace")
    assert code == 0, log[-3000:]
    assert left == [], f"processes outlived the Locust run: {left}"
    recorded = json.loads(dump.read_text())
    assert len(recorded["sidecar_pids"]) == 1, recorded["sidecar_pids"]  # one per process
    assert recorded["sidecar_kinds"] == [kind], recorded["sidecar_kinds"]
    embeddings = recorded["embeddings"]
    assert embeddings, log[-3000:]
    for text in list(embeddings)[:5]:
        expected = _reference_embedding(triton_server, text)
        np.testing.assert_allclose(np.array(embeddings[text]), expected, rtol=1e-5, atol=1e-5)
    assert "0(0.00%)" in log, log[-3000:]  # Locust's summary: no failed request


def test_the_sidecar_ends_with_a_killed_locust(
    triton_server: TritonServer, tmp_path: Path, kind: str
) -> None:
    """SIGKILL leaves Locust no time to close anything: the sidecar ends on its socket's EOF."""
    require_models("bert")
    tag = uuid.uuid4().hex
    args = ["--headless", "--host", triton_server.grpc_url, "-u", "2", "-r", "2"]
    args += ["--grpc-transport", TRANSPORTS[kind]]
    args += ["--run-time", "60s", "--only-summary"]
    env = {TAG: tag, "SIDECAR_TEST_DUMP": str(tmp_path / "dump.json")}
    with _locust(args, tmp_path / "locust.log", env) as process:
        sidecar_up = _wait_for(lambda: len(_tagged_processes(tag)) == 2, 30)
        os.kill(process.pid, signal.SIGKILL)  # Locust alone, not its process group
        process.wait(timeout=10)
        gone = _wait_for(lambda: not _tagged_processes(tag), 5)
        left = _tagged_processes(tag)
    log = (tmp_path / "locust.log").read_text(errors="replace")
    assert sidecar_up, log[-3000:]
    assert gone, f"the sidecar outlived its Locust process: {left}"


def _read_replies(sock: socket.socket, count: int) -> dict[int, tuple[int, bytes]]:
    buffer, replies = b"", {}
    while len(replies) < count:
        chunk = sock.recv(1 << 16)
        assert chunk, "the sidecar closed its socket"
        buffer += chunk
        while len(buffer) >= wire.REPLY.size:
            call_id, status, length = wire.REPLY.unpack_from(buffer)
            end = wire.REPLY.size + length
            if len(buffer) < end:
                break
            replies[call_id] = (status, buffer[wire.REPLY.size : end])
            buffer = buffer[end:]
    return replies


def test_the_sidecar_reassembles_frames_cut_anywhere(
    triton_server: TritonServer, kind: str
) -> None:
    """The real sidecar, fed byte by byte without gevent: two calls, replies by call id."""
    require_models("bert")
    text = b"Cut into single bytes."
    request = service_pb2.ModelInferRequest(model_name="bert")  # by hand: Triton's wire format
    request.inputs.add(name="TEXT", datatype="BYTES", shape=[1, 1])
    request.raw_input_contents.append(struct.pack("<I", len(text)) + text)
    missing = service_pb2.ModelInferRequest(model_name="no_such_model")
    frames = wire.request_frame(7, wire.INFER, 30.0, [("x-test", "1")], request.SerializeToString())
    frames += wire.request_frame(8, wire.INFER, None, None, missing.SerializeToString())
    ours, theirs = socket.socketpair()
    address = triton_server.grpc_url.split("://", 1)[1]
    command = _sidecar_command(kind, theirs.fileno(), address)
    process = subprocess.Popen(command, cwd=ROOT, pass_fds=[theirs.fileno()])
    theirs.close()
    try:
        for byte in frames:
            ours.send(bytes([byte]))
        ours.settimeout(30)
        replies = _read_replies(ours, 2)
    finally:
        ours.close()
        code = process.wait(timeout=10)  # our end closed: it exits by itself
    assert code == 0
    status, body = replies[7]
    assert status == wire.OK
    response = grpcclient.InferResult(service_pb2.ModelInferResponse.FromString(body))
    expected = _reference_embedding(triton_server, "Cut into single bytes.")
    np.testing.assert_allclose(response.as_numpy("EMBEDDING").reshape(-1), expected, atol=1e-6)
    status, body = replies[8]
    error = json.loads(body)
    assert status == wire.RPC_ERROR and error["code"].startswith("StatusCode."), error
    assert "no_such_model" in error["details"], error
