"""A tritonclient client that records what the SDK sends, checked against the real API.

MOCKED ON PURPOSE (the injectable ``client_factory``, as tests/unit/client/test_sdk_transport.py):
mutation runs cannot start Triton per mutant. Every call is bound to the signature of the
real tritonclient method of the same protocol and style (sync or asyncio), so a wrong
argument name or order fails here as it would against tritonclient; replies are real
tritonclient ``InferResult`` objects built from wire-format responses written by hand.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.grpc as grpc_module
import tritonclient.grpc.aio as grpc_aio
import tritonclient.http as http_module
import tritonclient.http.aio as http_aio
from tritonclient.grpc import service_pb2

from triton_kit.client.transport import ClientSpec

REAL = {
    ("grpc", False): grpc_module.InferenceServerClient,
    ("grpc", True): grpc_aio.InferenceServerClient,
    ("http", False): http_module.InferenceServerClient,
    ("http", True): http_aio.InferenceServerClient,
}
TRITON_TYPES = {"float32": "FP32", "int32": "INT32", "int64": "INT64", "object": "BYTES"}

Reply = Any  # a value, an exception to raise, or a callable of the bound arguments


def result(protocol: str, outputs: dict[str, np.ndarray]) -> Any:
    """A real tritonclient InferResult carrying ``outputs`` as the server would send them."""
    if protocol == "grpc":
        response = service_pb2.ModelInferResponse(model_name="m")
        for name, array in outputs.items():
            tensor = response.outputs.add(name=name, shape=list(array.shape))
            tensor.datatype = TRITON_TYPES[array.dtype.name]
            if array.dtype == np.object_:  # BYTES: 4-byte little-endian length before each
                raw = b"".join(len(v).to_bytes(4, "little") + v for v in array.reshape(-1).tolist())
            else:
                raw = array.tobytes()
            response.raw_output_contents.append(raw)
        return grpc_module.InferResult(response)
    body = {
        "model_name": "m",
        "outputs": [
            {
                "name": name,
                "datatype": TRITON_TYPES[array.dtype.name],
                "shape": list(array.shape),
                "data": [
                    v.decode() if isinstance(v, bytes) else v for v in array.reshape(-1).tolist()
                ],
            }
            for name, array in outputs.items()
        ],
    }
    return http_module.InferResult.from_response_body(json.dumps(body).encode())


class Recorder:
    """Plays one tritonclient client: records ``(method, bound arguments)``, answers ``replies``.

    ``replies[method]`` is a value, an exception (raised), a list (one item per call, the
    last repeated) or a callable of the bound arguments.
    """

    def __init__(self, spec: ClientSpec, replies: dict[str, Reply], calls: list) -> None:
        self.spec = spec
        self.real = REAL[(spec.endpoint.protocol, spec.aio)]
        self.replies = replies
        self.calls = calls
        self.closed = False

    def _answer(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        reply = self.replies.get(name)
        if isinstance(reply, list):
            reply = reply.pop(0) if len(reply) > 1 else reply[0]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(arguments)
        return reply

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.real, name)  # AttributeError: tritonclient has no such method
        signature = inspect.signature(method)

        def bind(*args: Any, **kwargs: Any) -> dict[str, Any]:
            arguments = dict(signature.bind(None, *args, **kwargs).arguments)
            del arguments["self"]
            return arguments

        if inspect.iscoroutinefunction(method):

            async def acall(*args: Any, **kwargs: Any) -> Any:
                return self._answer(name, bind(*args, **kwargs))

            return acall
        return lambda *args, **kwargs: self._answer(name, bind(*args, **kwargs))


class Factory:
    """A ``client_factory``: every client it builds shares one call log and one reply table."""

    def __init__(self, replies: dict[str, Reply] | None = None) -> None:
        self.replies = replies or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.specs: list[ClientSpec] = []
        self.clients: list[Recorder] = []

    def __call__(self, spec: ClientSpec) -> Recorder:
        self.specs.append(spec)
        client = Recorder(spec, self.replies, self.calls)
        self.clients.append(client)
        return client

    def named(self, method: str) -> list[dict[str, Any]]:
        return [arguments for name, arguments in self.calls if name == method]

    def methods(self) -> list[str]:
        return [name for name, _ in self.calls]


def describe(tensor: Any) -> dict[str, Any]:
    """What a tritonclient InferInput/InferRequestedOutput puts on the wire, either protocol."""
    if hasattr(tensor, "_get_binary_data") or isinstance(tensor._get_tensor(), dict):
        wire = dict(tensor._get_tensor())
        if hasattr(tensor, "_get_binary_data"):
            wire["raw"] = tensor._get_binary_data()
        return wire
    proto = tensor._get_tensor()
    wire = {"name": proto.name}
    if hasattr(tensor, "datatype"):
        wire.update(datatype=proto.datatype, shape=list(proto.shape), raw=tensor._get_content())
    parameters = {}
    for key, value in proto.parameters.items():
        parameters[key] = getattr(value, value.WhichOneof("parameter_choice"))
    if parameters:
        wire["parameters"] = parameters
    return wire


def family_reply(classes: dict[str, np.ndarray]) -> Callable[[dict[str, Any]], Any]:
    """An ``infer`` reply by the call's inputs: translate (TEXT and more), embed (TEXT alone),
    classify (anything else, answered with ``classes``); gRPC results."""

    def reply(arguments: dict[str, Any]) -> Any:
        name = describe(arguments["inputs"][0])["name"]
        if name == "TEXT" and len(arguments["inputs"]) > 1:
            return result("grpc", {"TRANSLATION": np.array([[b"t"]], dtype=np.object_)})
        if name == "TEXT":
            return result("grpc", {"EMBEDDING": np.array([[1.0]], dtype=np.float32)})
        return result("grpc", classes)

    return reply
