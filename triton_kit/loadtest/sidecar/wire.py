"""The frames between a Locust process and its gRPC sidecar
(``triton_kit.loadtest.sidecar.server``, or the native one,
``triton_kit/loadtest/sidecar/native/grpc_sidecar.cc``, which mirrors these structs by hand).

Both Python ends share this module so the layout is written once. A request frame carries a
call id (replies may come back in any order, since one socket multiplexes every user of
the process), the gRPC method, the deadline, the metadata and the already serialized
protobuf; the sidecar forwards the bytes untouched and never parses protobuf itself.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable

SERVICE = "/inference.GRPCInferenceService/"
METHODS = (SERVICE + "ModelInfer", SERVICE + "ServerReady", SERVICE + "ModelReady",
           SERVICE + "ModelMetadata")  # fmt: skip
INFER, SERVER_READY, MODEL_READY, MODEL_METADATA = range(len(METHODS))

# call id, method index, deadline in seconds (< 0: none), metadata bytes, payload bytes
REQUEST = struct.Struct("<IBdII")
# call id, status, body bytes
REPLY = struct.Struct("<IBI")
OK, RPC_ERROR = 0, 1  # RPC_ERROR's body: JSON {"code", "details", "debug"}
NO_DEADLINE = -1.0


def request_frame(
    call_id: int,
    method: int,
    timeout: float | None,
    metadata: Iterable[tuple[str, str]] | None,
    payload: bytes,
) -> bytes:
    """One request, ready for ``sendall``."""
    meta = json.dumps(list(metadata)).encode() if metadata else b""
    deadline = NO_DEADLINE if timeout is None else float(timeout)
    header = REQUEST.pack(call_id, method, deadline, len(meta), len(payload))
    return b"".join((header, meta, payload))


def parse_metadata(raw: bytes) -> tuple[tuple[str, str], ...] | None:
    return tuple((str(k), str(v)) for k, v in json.loads(raw)) if raw else None


def reply_frame(call_id: int, status: int, body: bytes) -> bytes:
    return REPLY.pack(call_id, status, len(body)) + body


def error_body(code: str, details: str, debug: str) -> bytes:
    """What tritonclient's ``get_error_grpc`` reads from a ``grpc.RpcError``."""
    return json.dumps({"code": code, "details": details, "debug": debug}).encode()
