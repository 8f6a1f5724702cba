"""The gRPC sidecar: one asyncio process per Locust process that makes its gRPC calls.

Why: under gevent, every blocking gRPC call of the Locust process was handed to a native
thread and back (``init_gevent``), which cost the gRPC user about half of a plain asyncio
client's rate (benchmarks/results/loadgen.md). Here grpc.aio runs on its own event loop, in its
own process, and relays raw bytes: the Locust process serializes the request and parses
the reply, and talks to this process over one socket (``triton_kit.loadtest.sidecar.wire`` frames).

Started by ``triton_kit.loadtest.sidecar.client`` with one end of a socket pair as ``--fd``.
It exits when that socket closes, so it cannot outlive the Locust process that started it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from triton_kit.loadtest.sidecar import wire


class Relay(asyncio.Protocol):
    """Reads request frames, forwards each as a gRPC call, writes the replies back."""

    def __init__(self, channel: grpc.aio.Channel, closed: asyncio.Future[None]) -> None:
        # No serializers: the payload is the serialized protobuf, forwarded as it is.
        self.calls = [channel.unary_unary(method) for method in wire.METHODS]
        self.closed = closed
        self.buffer = bytearray()
        self.out: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        offset, size = 0, wire.REQUEST.size
        while len(buffer) - offset >= size:
            call_id, method, deadline, meta_len, length = wire.REQUEST.unpack_from(buffer, offset)
            start = offset + size
            end = start + meta_len + length
            if len(buffer) < end:
                break
            metadata = wire.parse_metadata(bytes(buffer[start : start + meta_len]))
            payload = bytes(buffer[start + meta_len : end])
            timeout = None if deadline < 0 else deadline
            task = self.loop.create_task(self.forward(call_id, method, timeout, metadata, payload))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            offset = end
        del buffer[:offset]

    async def forward(
        self, call_id: int, method: int, timeout: float | None, metadata: Any, payload: bytes
    ) -> None:
        try:
            reply = await self.calls[method](payload, timeout=timeout, metadata=metadata)
        except grpc.aio.AioRpcError as error:
            body = wire.error_body(
                str(error.code()), error.details() or "", error.debug_error_string() or ""
            )
            self.send(wire.reply_frame(call_id, wire.RPC_ERROR, body))
        except Exception as exc:  # relayed as the client would see it, never swallowed
            body = wire.error_body(str(grpc.StatusCode.UNKNOWN), f"{type(exc).__name__}: {exc}", "")
            self.send(wire.reply_frame(call_id, wire.RPC_ERROR, body))
        else:
            self.send(wire.reply_frame(call_id, wire.OK, reply))

    def send(self, frame: bytes) -> None:
        """Replies finished in one loop iteration leave in one write."""
        if not self.out:
            self.loop.call_soon(self.flush)
        self.out.append(frame)

    def flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(self.out))
        self.out.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def channel(args: argparse.Namespace) -> grpc.aio.Channel:
    """The SDK's channel settings, with TLS when the URL said grpcs://."""
    from triton_kit.client.transport import GRPC_CHANNEL_ARGS

    if not args.ssl:
        return grpc.aio.insecure_channel(args.address, options=GRPC_CHANNEL_ARGS)

    def read(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    credentials = grpc.ssl_channel_credentials(
        read(args.root_certificates), read(args.private_key), read(args.certificate_chain)
    )
    return grpc.aio.secure_channel(args.address, credentials, options=GRPC_CHANNEL_ARGS)


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    closed: asyncio.Future[None] = loop.create_future()
    async with channel(args) as grpc_channel:
        sock = socket.socket(fileno=args.fd)
        await loop.connect_accepted_socket(lambda: Relay(grpc_channel, closed), sock)
        await closed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.loadtest.sidecar.server", description=__doc__
    )
    parser.add_argument("--fd", type=int, required=True, help="our end of the socket pair")
    parser.add_argument("--address", required=True, help="host:port of Triton's gRPC")
    parser.add_argument("--ssl", action="store_true")
    parser.add_argument("--root-certificates")
    parser.add_argument("--private-key")
    parser.add_argument("--certificate-chain")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the whole process group: Locust shuts down and closes our socket,
    # and the end of the socket is what ends this process (no traceback of its own).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
