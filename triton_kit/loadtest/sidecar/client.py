"""The Locust side of the gRPC sidecar: a tritonclient-shaped client for the SDK's seam.

``factory`` is a ``client_factory`` for ``client.TritonClient``: the SDK keeps building
requests, deadlines and its error mapping as for any gRPC client, and only the wire call
changes hands. Each call serializes the ``ModelInferRequest`` here, sends it to the
process's one sidecar over a gevent socket, and sleeps on a waiter until the reader
greenlet hands back the reply bytes; no native thread is involved.

The sidecar is the native one (``triton_kit/loadtest/sidecar/native``, built into the venv by
``scripts/build-native-sidecar.sh``: gRPC C++, about 0.09 ms of CPU per call, 0.15 in Python)
where it is built and the URL is plain grpc://, else the Python one
(``triton_kit.loadtest.sidecar.server``, grpc.aio). Both speak
``triton_kit.loadtest.sidecar.wire``'s frames, so nothing else differs.

A server error comes back as tritonclient's ``InferenceServerException`` with gRPC's own
code and details, so ``triton_kit.client.errors.translate_error`` sees what it would see from
tritonclient. A sidecar that dies fails every pending and later call with a
``ConnectionError`` that names it and its exit code; a silent one, after the call's
deadline plus ``GRACE_S``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import gevent.lock
import gevent.subprocess
from gevent import socket
from gevent.hub import Waiter
from tritonclient.grpc import InferResult, service_pb2
from tritonclient.grpc._utils import _get_inference_request
from tritonclient.utils import InferenceServerException

from triton_kit.client.errors import ConfigurationError
from triton_kit.client.transport import ClientSpec, Endpoint
from triton_kit.loadtest.sidecar import wire

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[3]
GRACE_S = 5.0  # past the call's deadline, a silent sidecar is reported, not waited on
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
GONE = 2  # reader-side status: the sidecar is gone; the body is the message


NATIVE_NAME = "triton-kit-grpc-sidecar"
NATIVE_ENV = "TRITON_KIT_NATIVE_SIDECAR"  # another binary, e.g. built outside the venv
BUILD_SCRIPT = "scripts/build-native-sidecar.sh"
KINDS = ("auto", "native", "python")  # auto: native where it is built and can serve the URL


def native_path() -> Path:
    """``$TRITON_KIT_NATIVE_SIDECAR``, else where scripts/build-native-sidecar.sh puts the
    binary: this venv's bin."""
    return Path(os.environ.get(NATIVE_ENV) or Path(sys.prefix) / "bin" / NATIVE_NAME)


def use_native(kind: str, endpoint: Endpoint) -> bool:
    """Which sidecar serves ``endpoint``; a forced native one that cannot is an error."""
    if kind not in KINDS:
        raise ConfigurationError(f"no gRPC sidecar kind {kind!r}; choose from {KINDS}")
    if kind == "python":
        return False
    if endpoint.ssl:  # TLS is the Python sidecar's only
        if kind == "native":
            raise ConfigurationError("the native gRPC sidecar has no TLS: use sidecar-python")
        return False
    if native_path().is_file() and os.access(native_path(), os.X_OK):
        return True
    if kind == "native":
        raise ConfigurationError(f"no native gRPC sidecar at {native_path()}: run {BUILD_SCRIPT}")
    _warn_fallback_once()
    return False


def _warn_fallback_once() -> None:
    global _fallback_warned
    if not _fallback_warned:
        _fallback_warned = True
        logger.warning(
            "native gRPC sidecar not built (%s missing; run %s): the gRPC users go through "
            "the slower Python sidecar",
            native_path(),
            BUILD_SCRIPT,
        )


def _command(fd: int, endpoint: Endpoint, tls: Any, native: bool) -> list[str]:
    if native:
        return [str(native_path()), "--fd", str(fd), "--address", endpoint.address]
    command = [sys.executable, "-m", "triton_kit.loadtest.sidecar.server", "--fd", str(fd)]
    command += ["--address", endpoint.address]
    if endpoint.ssl:
        command.append("--ssl")
        files = {
            "--root-certificates": getattr(tls, "ca_file", None),
            "--private-key": getattr(tls, "key_file", None),
            "--certificate-chain": getattr(tls, "cert_file", None),
        }
        for flag, path in files.items():
            if path:
                command += [flag, str(Path(path).resolve())]
    return command


class Sidecar:
    """One sidecar process and the socket every user of this process multiplexes on."""

    def __init__(self, endpoint: Endpoint, tls: Any = None, native: bool = False) -> None:
        ours, theirs = socket.socketpair()
        command = _command(theirs.fileno(), endpoint, tls, native)
        self.native = native
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
        self.process = gevent.subprocess.Popen(
            command, pass_fds=(theirs.fileno(),), stdin=gevent.subprocess.DEVNULL, env=env
        )
        theirs.close()
        self.sock = ours
        self.hub = gevent.get_hub()
        self.pending: dict[int, Waiter] = {}
        self.ids = itertools.count(1)
        self.outbox: list[bytes] = []
        self.ready = gevent.event.Event()
        self.gone: str | None = None
        self.closing = False
        self.final_cpu_s = 0.0
        self.reader = gevent.spawn(self._read)
        self.writer = gevent.spawn(self._write)

    @property
    def pid(self) -> int:
        return self.process.pid

    def call(
        self, method: int, payload: bytes, timeout: float | None, metadata: Any = None
    ) -> bytes:
        """Send one call and sleep until its reply; raise as tritonclient would."""
        if self.gone is not None:
            raise ConnectionError(self.gone)
        call_id = next(self.ids) & 0xFFFFFFFF
        waiter = Waiter()
        self.pending[call_id] = waiter
        self.outbox.append(wire.request_frame(call_id, method, timeout, metadata, payload))
        self.ready.set()
        try:
            wait = None if timeout is None else timeout + GRACE_S
            with gevent.Timeout(wait, False):
                status, body = waiter.get()
                return _reply(status, body)
        except OSError as exc:
            raise ConnectionError(self._gone_message(f"{type(exc).__name__}: {exc}")) from None
        finally:
            self.pending.pop(call_id, None)
        raise ConnectionError(
            f"the load test's gRPC sidecar (pid {self.pid}) did not answer within the call's "
            f"{timeout:g} s deadline + {GRACE_S:g} s"
        )

    def _write(self) -> None:
        """The one writer: every frame queued since its last turn leaves in one send, so a
        burst of users wakes the sidecar once."""
        try:
            while True:
                self.ready.wait()
                self.ready.clear()
                frames, self.outbox = self.outbox, []
                self.sock.sendall(b"".join(frames))
        except OSError as exc:
            self._fail(f"{type(exc).__name__}: {exc}")

    def _read(self) -> None:
        """The one reader: hands each reply to its caller's waiter, through the hub."""
        buffer = bytearray()
        size = wire.REPLY.size
        reason = "its socket closed"
        try:
            while data := self.sock.recv(1 << 20):
                buffer += data
                offset = 0
                while len(buffer) - offset >= size:
                    call_id, status, length = wire.REPLY.unpack_from(buffer, offset)
                    end = offset + size + length
                    if len(buffer) < end:
                        break
                    waiter = self.pending.pop(call_id, None)
                    if waiter is not None:
                        body = bytes(buffer[offset + size : end])
                        self.hub.loop.run_callback(waiter.switch, (status, body))
                    offset = end
                del buffer[:offset]
        except OSError as exc:
            reason = f"{type(exc).__name__}: {exc}"
        self._fail(reason)

    def _gone_message(self, reason: str) -> str:
        if self.closing:
            return f"the load test's gRPC sidecar (pid {self.pid}) was closed"
        code = self.process.wait(timeout=2.0)
        state = "is still running" if code is None else f"exited with code {code}"
        return (
            f"the load test's gRPC sidecar (pid {self.pid}) {state} and dropped its socket "
            f"({reason}); its calls cannot complete"
        )

    def _fail(self, reason: str) -> None:
        if self.gone is None:
            self.gone = self._gone_message(reason)
            if not self.closing:
                logger.error("%s", self.gone)
        for waiter in list(self.pending.values()):
            self.hub.loop.run_callback(waiter.switch, (GONE, self.gone.encode()))
        self.pending.clear()

    def cpu_seconds(self) -> float:
        """The sidecar's CPU time so far (Linux /proc; 0 where there is none)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return self.final_cpu_s
        self.final_cpu_s = (int(fields[11]) + int(fields[12])) / _TICKS
        return self.final_cpu_s

    def close(self) -> None:
        """Close the socket (the sidecar exits on EOF) and reap it; kill it if it lingers."""
        global _retired_cpu_s
        if self.closing:
            return
        _retired_cpu_s += self.cpu_seconds()
        self.closing = True
        self.sock.close()
        if self.process.wait(timeout=5.0) is None:
            self.process.kill()
            self.process.wait(timeout=5.0)
        self.reader.kill(block=False)
        self.writer.kill(block=False)


def _reply(status: int, body: bytes) -> bytes:
    if status == wire.OK:
        return body
    if status == GONE:
        raise ConnectionError(body.decode())
    error = json.loads(body)
    raise InferenceServerException(
        msg=error["details"], status=error["code"], debug_details=error["debug"]
    )


class SidecarClient:
    """The subset of ``tritonclient.grpc.InferenceServerClient`` the SDK's Transport uses."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    def _unary(
        self, method: int, request: Any, reply_type: Any, timeout: float | None, headers: Any
    ) -> Any:
        """One call through the sidecar: the request serialized here, the reply parsed here."""
        metadata = tuple(headers.items()) if headers else None
        reply = self.sidecar.call(method, request.SerializeToString(), timeout, metadata)
        return reply_type.FromString(reply)

    def infer(
        self,
        model_name: str,
        inputs: list[Any],
        model_version: str = "",
        outputs: list[Any] | None = None,
        request_id: str = "",
        timeout: int | None = None,
        client_timeout: float | None = None,
        headers: dict[str, str] | None = None,
        compression_algorithm: str | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> InferResult:
        if compression_algorithm:
            raise ConfigurationError("the load test's gRPC sidecar sends no compression")
        request = _get_inference_request(
            model_name=model_name, inputs=inputs, model_version=model_version,
            request_id=request_id, outputs=outputs, sequence_id=0, sequence_start=False,
            sequence_end=False, priority=0, timeout=timeout, parameters=parameters,
        )  # fmt: skip
        reply_type = service_pb2.ModelInferResponse
        return InferResult(self._unary(wire.INFER, request, reply_type, client_timeout, headers))

    def is_server_ready(
        self, headers: dict[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        request, reply_type = service_pb2.ServerReadyRequest(), service_pb2.ServerReadyResponse
        return self._unary(wire.SERVER_READY, request, reply_type, client_timeout, headers).ready

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: dict[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> bool:
        request = service_pb2.ModelReadyRequest(name=model_name, version=model_version)
        reply_type = service_pb2.ModelReadyResponse
        return self._unary(wire.MODEL_READY, request, reply_type, client_timeout, headers).ready

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: dict[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        request = service_pb2.ModelMetadataRequest(name=model_name, version=model_version)
        reply_type = service_pb2.ModelMetadataResponse
        response = self._unary(wire.MODEL_METADATA, request, reply_type, client_timeout, headers)
        if not as_json:
            return response
        from google.protobuf.json_format import MessageToJson  # type: ignore[import-untyped]

        return json.loads(MessageToJson(response, preserving_proto_field_name=True))

    def close(self) -> None:
        """The sidecar is the process's, shared by every user: ``close_all`` stops it."""


_sidecars: dict[tuple[int, str, bool, Any, bool], Sidecar] = {}
_starting = gevent.lock.RLock()
_retired_cpu_s = 0.0  # CPU time of this process's sidecars already closed
_fallback_warned = False


def cpu_seconds() -> float:
    """CPU time of every sidecar this process started, for the recorder's CPU trace."""
    pid = os.getpid()
    live = sum(s.cpu_seconds() for key, s in _sidecars.items() if key[0] == pid and not s.closing)
    return _retired_cpu_s + live


def sidecar_for(endpoint: Endpoint, tls: Any = None, kind: str = "auto") -> Sidecar:
    """This process's sidecar for ``endpoint`` (started on first use; one per forked worker)."""
    native = use_native(kind, endpoint)
    key = (os.getpid(), endpoint.address, endpoint.ssl, tls, native)
    with _starting:  # starting a process yields: the other users must wait, not start theirs
        sidecar = _sidecars.get(key)
        if sidecar is None or sidecar.closing:
            sidecar = _sidecars[key] = Sidecar(endpoint, tls, native)
    return sidecar


def factory(spec: ClientSpec, kind: str = "auto") -> SidecarClient:
    """A ``client_factory`` for ``client.TritonClient`` (sync, gRPC only); ``kind`` is one
    of ``KINDS``."""
    if spec.aio or spec.endpoint.protocol != "grpc":
        raise ConfigurationError("the gRPC sidecar serves the sync SDK over grpc:// only")
    return SidecarClient(sidecar_for(spec.endpoint, spec.options.tls, kind))


def close_all() -> None:
    """Stop every sidecar this process started (Locust's test_stop and quitting)."""
    for key, sidecar in list(_sidecars.items()):
        if key[0] == os.getpid():
            sidecar.close()
        del _sidecars[key]
