"""Protocol adapters over tritonclient: the only module that knows gRPC from HTTP.

Each adapter speaks numpy in and numpy out; every error leaves through
``translate_error``. The HTTP client is not thread-safe, so the SDK gives each
thread its own adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import numpy as np
from tritonclient.utils import np_to_triton_dtype

from client.codecs import Call
from client.errors import translate_error
from client.types import Timeout

DEFAULT_PORTS = {"grpc": 8001, "http": 8000, "https": 443}


@dataclass(frozen=True)
class Endpoint:
    protocol: str  # "grpc" or "http"
    address: str  # host:port, as tritonclient expects
    ssl: bool = False

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parsed = urlparse(url if "://" in url else f"http://{url}")
        scheme = parsed.scheme.lower()
        if scheme not in {"grpc", "grpcs", "http", "https"}:
            raise ValueError(
                f"unsupported URL scheme {scheme!r} in {url!r}: use grpc:// or http://"
            )
        protocol = "grpc" if scheme.startswith("grpc") else "http"
        port = parsed.port or DEFAULT_PORTS["https" if scheme == "https" else protocol]
        return cls(protocol, f"{parsed.hostname}:{port}", ssl=scheme in {"grpcs", "https"})


def _module(protocol: str, aio: bool) -> Any:
    if protocol == "grpc":
        if aio:
            import tritonclient.grpc.aio as module
        else:
            import tritonclient.grpc as module
    elif aio:
        import tritonclient.http.aio as module
    else:
        import tritonclient.http as module
    return module


def _infer_inputs(module: Any, inputs: Mapping[str, np.ndarray], protocol: str) -> list[Any]:
    tensors = []
    for name, array in inputs.items():
        tensor = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        if protocol == "http":
            tensor.set_data_from_numpy(array, binary_data=True)
        else:
            tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


def _requested(module: Any, names: tuple[str, ...], protocol: str) -> list[Any]:
    if protocol == "http":
        return [module.InferRequestedOutput(name, binary_data=True) for name in names]
    return [module.InferRequestedOutput(name) for name in names]


def _results(result: Any, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {name: result.as_numpy(name) for name in names}


class Transport:
    """Blocking calls on one tritonclient instance (one per thread)."""

    def __init__(self, endpoint: Endpoint, timeout: Timeout) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._module = _module(endpoint.protocol, aio=False)
        self._clients: dict[float | None, Any] = {}

    def _client(self, request_timeout: float | None) -> Any:
        """HTTP deadlines are fixed per connection, so keep one client per timeout value."""
        key = request_timeout if self.endpoint.protocol == "http" else None
        if key not in self._clients:
            if self.endpoint.protocol == "grpc":
                client = self._module.InferenceServerClient(
                    self.endpoint.address, ssl=self.endpoint.ssl
                )
            else:
                client = self._module.InferenceServerClient(
                    self.endpoint.address,
                    ssl=self.endpoint.ssl,
                    connection_timeout=self.timeout.connect,
                    network_timeout=request_timeout or 24 * 3600.0,
                )
            self._clients[key] = client
        return self._clients[key]

    def infer(self, call: Call, timeout: Timeout) -> dict[str, np.ndarray]:
        protocol = self.endpoint.protocol
        client = self._client(timeout.request)
        kwargs: dict[str, Any] = {}
        if protocol == "grpc" and timeout.request is not None:
            kwargs["client_timeout"] = timeout.request
        try:
            result = client.infer(
                call.model,
                _infer_inputs(self._module, call.inputs, protocol),
                outputs=_requested(self._module, call.outputs, protocol),
                **kwargs,
            )
        except Exception as exc:
            raise translate_error(exc) from exc
        return _results(result, call.outputs)

    def server_ready(self) -> bool:
        try:
            return bool(self._client(self.timeout.request).is_server_ready())
        except Exception:
            return False

    def model_ready(self, model: str) -> bool:
        try:
            return bool(self._client(self.timeout.request).is_model_ready(model))
        except Exception:
            return False

    def model_metadata(self, model: str) -> dict[str, Any]:
        try:
            client = self._client(self.timeout.request)
            if self.endpoint.protocol == "grpc":
                return client.get_model_metadata(model, as_json=True)
            return client.get_model_metadata(model)
        except Exception as exc:
            raise translate_error(exc) from exc

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


class AsyncTransport:
    """Awaitable calls on tritonclient's asyncio clients."""

    def __init__(self, endpoint: Endpoint, timeout: Timeout) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._module = _module(endpoint.protocol, aio=True)
        self._client_instance: Any = None

    def _client(self) -> Any:
        if self._client_instance is None:
            if self.endpoint.protocol == "grpc":
                self._client_instance = self._module.InferenceServerClient(
                    self.endpoint.address, ssl=self.endpoint.ssl
                )
            else:
                self._client_instance = self._module.InferenceServerClient(
                    self.endpoint.address, ssl=self.endpoint.ssl, conn_timeout=self.timeout.connect
                )
        return self._client_instance

    async def infer(self, call: Call, timeout: Timeout) -> dict[str, np.ndarray]:
        protocol = self.endpoint.protocol
        coroutine = self._client().infer(
            call.model,
            _infer_inputs(self._module, call.inputs, protocol),
            outputs=_requested(self._module, call.outputs, protocol),
        )
        try:
            result = await asyncio.wait_for(coroutine, timeout.request)
        except Exception as exc:
            raise translate_error(exc) from exc
        return _results(result, call.outputs)

    async def server_ready(self) -> bool:
        try:
            return bool(await self._client().is_server_ready())
        except Exception:
            return False

    async def model_ready(self, model: str) -> bool:
        try:
            return bool(await self._client().is_model_ready(model))
        except Exception:
            return False

    async def model_metadata(self, model: str) -> dict[str, Any]:
        try:
            if self.endpoint.protocol == "grpc":
                return await self._client().get_model_metadata(model, as_json=True)
            return await self._client().get_model_metadata(model)
        except Exception as exc:
            raise translate_error(exc) from exc

    async def close(self) -> None:
        if self._client_instance is not None:
            await self._client_instance.close()
            self._client_instance = None
