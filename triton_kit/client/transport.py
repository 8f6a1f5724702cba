"""Protocol adapters over tritonclient: the only module that knows gRPC from HTTP.

Each adapter speaks numpy in and numpy out, retries what may be retried within the
call's deadline, and lets every error leave through ``translate_error``. The
tritonclient instance comes from a ``ClientFactory``: the default builds the real one;
tests pass a fake to drive every error branch without a server. The HTTP client is not
thread-safe, so the sync SDK gives each thread its own adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import numpy as np
from tritonclient.utils import np_to_triton_dtype

from triton_kit.client.codecs import Call
from triton_kit.client.errors import (
    CallContext,
    ConfigurationError,
    ModelUnavailableError,
    ServerConnectionError,
    TritonClientError,
    translate_error,
)
from triton_kit.client.options import API_KEY_HEADER, GRPC_HEADER_PREFIX, ClientOptions
from triton_kit.client.retry import RetryLoop
from triton_kit.client.shm import (
    Region,
    RegionPool,
    input_bytes,
    still_in_use,
    still_registered,
    unregister_waiting,
    unregister_waiting_async,
)
from triton_kit.client.types import Timeout

DEFAULT_PORTS = {"grpc": 8001, "http": 8000, "https": 443}
# A restarted server is reached within about a second, not after gRPC's default backoff
# (up to 120 s; 8-9 s observed after a restart). The other values are tritonclient's own.
GRPC_CHANNEL_ARGS = [
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.max_receive_message_length", 2**31 - 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Each channel dials for itself: after _reset() the next attempt gets a fresh
    # connection instead of the shared subchannel still waiting out its backoff.
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.keepalive_time_ms", 2**31 - 1),
    ("grpc.keepalive_timeout_ms", 20000),
    ("grpc.keepalive_permit_without_calls", False),
    ("grpc.http2.max_pings_without_data", 2),
]


# Tuples of requested output names whose tritonclient objects a transport keeps (an SDK method
# asks for the same outputs every call; infer() callers may ask for any).
OUTPUTS_CACHED = 64


@functools.lru_cache(maxsize=64)
def triton_dtype(dtype: np.dtype) -> str | None:
    """Triton's name of a numpy dtype, None for one it lacks (tritonclient's
    ``np_to_triton_dtype``, which tries each type in turn: BYTES, the SDK's text, comes
    last), remembered per dtype."""
    name: str | None = np_to_triton_dtype(dtype)
    return name


@dataclass(frozen=True)
class Endpoint:
    protocol: str  # "grpc" or "http"
    address: str  # host:port, as tritonclient expects
    ssl: bool = False
    url: str = ""

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parsed = urlparse(url if "://" in url else f"http://{url}")
        scheme = parsed.scheme.lower()
        if scheme not in {"grpc", "grpcs", "http", "https"}:
            raise ConfigurationError(
                f"unsupported URL scheme {scheme!r} in {url!r}: use grpc:// or http://"
            )
        if not parsed.hostname:
            raise ConfigurationError(f"no host in URL {url!r}")
        protocol = "grpc" if scheme.startswith("grpc") else "http"
        try:
            port = parsed.port or DEFAULT_PORTS["https" if scheme == "https" else protocol]
        except ValueError as exc:
            raise ConfigurationError(f"bad port in URL {url!r}: {exc}") from None
        address = f"{parsed.hostname}:{port}"
        return cls(protocol, address, ssl=scheme in {"grpcs", "https"}, url=f"{scheme}://{address}")


@dataclass(frozen=True)
class ClientSpec:
    """What a factory needs to build one tritonclient ``InferenceServerClient``."""

    endpoint: Endpoint
    options: ClientOptions
    aio: bool
    network_timeout: float | None = None  # sync HTTP only: fixed per connection


ClientFactory = Callable[[ClientSpec], Any]


def tritonclient_module(protocol: str, aio: bool) -> Any:
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


def default_factory(spec: ClientSpec) -> Any:
    """The real tritonclient client, with TLS and connection settings passed through."""
    endpoint, options = spec.endpoint, spec.options
    module = tritonclient_module(endpoint.protocol, spec.aio)
    tls = options.tls
    if endpoint.protocol == "grpc":
        kwargs: dict[str, Any] = {"ssl": endpoint.ssl, "channel_args": GRPC_CHANNEL_ARGS}
        if tls is not None:
            kwargs.update(
                root_certificates=tls.ca_file,
                private_key=tls.key_file,
                certificate_chain=tls.cert_file,
            )
        return module.InferenceServerClient(endpoint.address, **kwargs)
    if spec.aio:
        return module.InferenceServerClient(
            endpoint.address,
            ssl=endpoint.ssl,
            ssl_context=_ssl_context(tls) if endpoint.ssl else None,
            conn_timeout=spec.network_timeout or 24 * 3600.0,
        )
    ssl_options: dict[str, Any] = {}
    if tls is not None:
        ssl_options = {
            k: v
            for k, v in {
                "ca_certs": tls.ca_file,
                "certfile": tls.cert_file,
                "keyfile": tls.key_file,
            }.items()
            if v
        }
    return module.InferenceServerClient(
        endpoint.address,
        ssl=endpoint.ssl,
        ssl_options=ssl_options or None,
        insecure=bool(tls and tls.insecure),
        connection_timeout=options.timeout.connect,
        network_timeout=spec.network_timeout or 24 * 3600.0,
    )


def _ssl_context(tls: Any) -> Any:
    import ssl

    context = ssl.create_default_context(cafile=tls.ca_file if tls else None)
    if tls is not None and tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    if tls is not None and tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


@dataclass
class Prepared:
    """One attempt's tritonclient arguments, and the shared-memory regions it holds."""

    inputs: list[Any]
    outputs: list[Any] | None
    kwargs: dict[str, Any]
    new_regions: list[Region] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)


@dataclass(frozen=True)
class Request:
    """A call as the transport sends it: what to run and the per-call settings."""

    call: Call
    timeout: Timeout
    request_id: str = ""
    headers: Mapping[str, str] | None = None
    version: str | None = None
    idempotent: bool = True

    def context(self, url: str) -> CallContext:
        return CallContext(url, self.call.model, self.timeout.request)


class _Base:
    """What both adapters share: building requests, shared memory, results."""

    aio = False

    def __init__(
        self, endpoint: Endpoint, options: ClientOptions, factory: ClientFactory | None = None
    ) -> None:
        self.endpoint = endpoint
        self.options = options
        self.factory = factory or default_factory
        self.module = tritonclient_module(endpoint.protocol, self.aio)
        self.pool = RegionPool(options.shared_memory, options.cuda_device) if (
            options.shared_memory
        ) else None  # fmt: skip
        # What every call sends alike, worked out once: the options are frozen, and an
        # SDK method repeats the same outputs (client CPU shares the cores with the server).
        self._headers = {**self._key_header(), **options.headers}
        self._outputs: dict[tuple[str, ...], tuple[Any, ...]] = {}

    @property
    def url(self) -> str:
        return self.endpoint.url

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str] | None:
        merged = {**self._headers, **extra} if extra else dict(self._headers)
        return merged or None

    def _key_header(self) -> dict[str, str]:
        if not self.options.api_key:
            return {}
        prefix = GRPC_HEADER_PREFIX if self.endpoint.protocol == "grpc" else ""
        return {prefix + API_KEY_HEADER: self.options.api_key}

    def prepare(self, request: Request, remaining: float | None) -> Prepared:
        http = self.endpoint.protocol == "http"
        prepared = Prepared([], None, {})
        pool = self.pool
        for name, array in request.call.inputs.items():
            tensor = self.module.InferInput(name, list(array.shape), triton_dtype(array.dtype))
            size = input_bytes(array) if pool is not None else 0
            if pool is not None and size >= max(self.options.shared_memory_threshold, 1):
                region, new = pool.take(size)
                pool.write(region, array)
                tensor.set_shared_memory(region.name, size)
                prepared.regions.append(region)
                if new:
                    prepared.new_regions.append(region)
            elif http:
                tensor.set_data_from_numpy(array, binary_data=True)
            else:
                tensor.set_data_from_numpy(array)
            prepared.inputs.append(tensor)
        if request.call.outputs:
            prepared.outputs = list(self._requested_outputs(request.call.outputs))
        prepared.kwargs = self._infer_kwargs(request, remaining)
        return prepared

    def _requested_outputs(self, names: tuple[str, ...]) -> tuple[Any, ...]:
        """tritonclient's ``InferRequestedOutput`` for ``names``, built once per tuple of names
        (tritonclient only reads them; at most ``OUTPUTS_CACHED`` tuples are kept)."""
        outputs = self._outputs.get(names)
        if outputs is None:
            http = self.endpoint.protocol == "http"
            outputs = tuple(
                self.module.InferRequestedOutput(name, binary_data=True)
                if http
                else self.module.InferRequestedOutput(name)
                for name in names
            )
            if len(self._outputs) < OUTPUTS_CACHED:
                self._outputs[names] = outputs
        return outputs

    def _infer_kwargs(self, request: Request, remaining: float | None) -> dict[str, Any]:
        version = request.version
        if version is None:
            version = self.options.version_of(request.call.model)
        kwargs: dict[str, Any] = {
            "model_version": str(version),
            "request_id": request.request_id,
            "headers": self.headers(request.headers),
        }
        if remaining is not None:  # the deadline also reaches Triton's queue (microseconds)
            kwargs["timeout"] = max(int(remaining * 1e6), 1)
        compression = self.options.compression
        if self.endpoint.protocol == "grpc":
            if remaining is not None:
                kwargs["client_timeout"] = remaining
            if compression:
                kwargs["compression_algorithm"] = compression
        elif compression:
            kwargs["request_compression_algorithm"] = compression
            kwargs["response_compression_algorithm"] = compression
        return kwargs

    def release(self, prepared: Prepared) -> None:
        if self.pool is not None:
            for region in prepared.regions:
                self.pool.give(region)

    def register_args(self, region: Region) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        """The tritonclient method and arguments that register ``region``."""
        headers = {"headers": self.headers()}
        if self.pool is not None and self.pool.kind == "cuda":
            raw = self.pool.raw_handle(region)
            args = (region.name, raw, self.pool.device, region.size)
            return "register_cuda_shared_memory", args, headers
        return "register_system_shared_memory", (region.name, region.key, region.size), headers

    def unregister_name(self) -> str:
        kind = self.pool.kind if self.pool is not None else "system"
        return f"unregister_{kind}_shared_memory"

    def results(self, result: Any, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        if not names:
            response = result.get_response()
            if self.endpoint.protocol == "grpc":
                names = tuple(output.name for output in response.outputs)
            else:
                names = tuple(output["name"] for output in response.get("outputs", []))
        return {name: result.as_numpy(name) for name in names}

    def fail(self, exc: BaseException, context: CallContext, request_id: str) -> TritonClientError:
        error = translate_error(exc, context)
        if request_id and getattr(error, "request_id", None) is None:
            error.request_id = request_id
        return error


def _ready_or_raise(exc: BaseException, context: CallContext) -> bool:
    """``False`` when the server is simply not up (yet); every other failure is raised."""
    error = translate_error(exc, context)
    if isinstance(error, ServerConnectionError) and error.retryable:
        return False
    if isinstance(error, ModelUnavailableError) and context.model is not None:
        return False
    raise error from exc


class Transport(_Base):
    """Blocking calls on tritonclient clients owned by one thread."""

    def __init__(
        self, endpoint: Endpoint, options: ClientOptions, factory: ClientFactory | None = None
    ) -> None:
        super().__init__(endpoint, options, factory)
        self._clients: dict[float | None, Any] = {}

    def _client(self, request_timeout: float | None) -> Any:
        """HTTP deadlines are fixed per connection, so keep one client per timeout value."""
        key = request_timeout if self.endpoint.protocol == "http" else None
        if key not in self._clients:
            spec = ClientSpec(self.endpoint, self.options, aio=False, network_timeout=key)
            self._clients[key] = self.factory(spec)
        return self._clients[key]

    def _reset(self) -> None:
        """Drop the connections after a connection failure: the next attempt dials afresh."""
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()

    def infer(self, request: Request) -> dict[str, np.ndarray]:
        loop = RetryLoop(self.options.retry, request.timeout.request, request.idempotent)
        while True:
            try:
                return self._infer_once(request, loop.remaining())
            except Exception as exc:
                error = self.fail(exc, request.context(self.url), request.request_id)
                if isinstance(error, ServerConnectionError):
                    self._reset()
                delay = loop.next_delay(error)
                if delay is None:
                    raise error from exc
                time.sleep(delay)

    def _infer_once(self, request: Request, remaining: float | None) -> dict[str, np.ndarray]:
        client = self._client(request.timeout.request)
        prepared = self.prepare(request, remaining)
        try:
            for region in prepared.new_regions:
                method, args, kwargs = self.register_args(region)
                getattr(client, method)(*args, **kwargs)
            result = client.infer(
                request.call.model, prepared.inputs, outputs=prepared.outputs, **prepared.kwargs
            )
        finally:
            self.release(prepared)
        return self.results(result, request.call.outputs)

    def _probe(self, model: str | None, timeout: float | None, call: Callable[[Any], Any]) -> Any:
        client = self._client(timeout)
        try:
            return call(client)
        except Exception as exc:
            raise _Probe(exc, CallContext(self.url, model, timeout)) from exc

    def _kwargs(self, timeout: float | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"headers": self.headers()}
        if self.endpoint.protocol == "grpc" and timeout is not None:
            kwargs["client_timeout"] = timeout
        return kwargs

    def server_ready(self, timeout: float | None) -> bool:
        try:
            return bool(
                self._probe(None, timeout, lambda c: c.is_server_ready(**self._kwargs(timeout)))
            )
        except _Probe as probe:
            return _ready_or_raise(probe.exc, probe.context)

    def model_ready(self, model: str, version: str, timeout: float | None) -> bool:
        try:
            kwargs = self._kwargs(timeout)
            return bool(
                self._probe(model, timeout, lambda c: c.is_model_ready(model, version, **kwargs))
            )
        except _Probe as probe:
            return _ready_or_raise(probe.exc, probe.context)

    def model_metadata(self, model: str, version: str, timeout: float | None) -> dict[str, Any]:
        extra = {"as_json": True} if self.endpoint.protocol == "grpc" else {}
        try:
            return self._probe(
                model,
                timeout,
                lambda c: c.get_model_metadata(model, version, **extra, **self._kwargs(timeout)),
            )
        except _Probe as probe:
            raise translate_error(probe.exc, probe.context) from probe.exc

    def close(self) -> None:
        """Unregister and destroy shared memory, then close every connection."""
        if self.pool is not None:
            regions = self.pool.drain()
            if regions:
                with contextlib.suppress(Exception):
                    client = self._client(self.options.timeout.request)
                    for region in regions:
                        self._unregister(getattr(client, self.unregister_name()), region)
                for region in regions:
                    with contextlib.suppress(Exception):
                        self.pool.destroy(region)
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()

    def _unregister(self, unregister: Callable[..., Any], region: Region) -> None:
        """Unregister, waiting out Triton's "in use" just after a call (triton_kit/client/shm.py); a
        server gone or a region it does not know leaves nothing to release."""
        failure = unregister_waiting(unregister, region.name, headers=self.headers())
        if failure is not None and still_in_use(failure):
            still_registered(region.name, failure)


class _Probe(Exception):
    """Carries a readiness/metadata failure to the one place that decides what it means."""

    def __init__(self, exc: BaseException, context: CallContext) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.context = context


class AsyncTransport(_Base):
    """Awaitable calls on one tritonclient asyncio client, shared by all tasks."""

    aio = True

    def __init__(
        self, endpoint: Endpoint, options: ClientOptions, factory: ClientFactory | None = None
    ) -> None:
        super().__init__(endpoint, options, factory)
        self._instance: Any = None

    def _client(self) -> Any:
        if self._instance is None:
            spec = ClientSpec(
                self.endpoint, self.options, aio=True, network_timeout=self.options.timeout.request
            )
            self._instance = self.factory(spec)
        return self._instance

    async def _reset(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            with contextlib.suppress(Exception):
                await instance.close()

    async def infer(self, request: Request) -> dict[str, np.ndarray]:
        loop = RetryLoop(self.options.retry, request.timeout.request, request.idempotent)
        while True:
            try:
                return await self._infer_once(request, loop.remaining())
            except Exception as exc:
                error = self.fail(exc, request.context(self.url), request.request_id)
                if isinstance(error, ServerConnectionError):
                    await self._reset()
                delay = loop.next_delay(error)
                if delay is None:
                    raise error from exc
                await asyncio.sleep(delay)

    async def _infer_once(self, request: Request, remaining: float | None) -> dict[str, np.ndarray]:
        client = self._client()
        prepared = self.prepare(request, remaining)
        try:
            for region in prepared.new_regions:
                method, args, kwargs = self.register_args(region)
                await getattr(client, method)(*args, **kwargs)
            coroutine = client.infer(
                request.call.model, prepared.inputs, outputs=prepared.outputs, **prepared.kwargs
            )
            if "client_timeout" in prepared.kwargs:  # gRPC enforces its own deadline
                result = await coroutine
            else:
                result = await asyncio.wait_for(coroutine, remaining)
        finally:
            self.release(prepared)
        return self.results(result, request.call.outputs)

    async def _probe(
        self, model: str | None, timeout: float | None, make: Callable[[Any], Any]
    ) -> Any:
        kwargs: dict[str, Any] = {"headers": self.headers()}
        if self.endpoint.protocol == "grpc" and timeout is not None:
            kwargs["client_timeout"] = timeout
        try:
            return await asyncio.wait_for(make(self._client())(**kwargs), timeout)
        except Exception as exc:
            raise _Probe(exc, CallContext(self.url, model, timeout)) from exc

    async def server_ready(self, timeout: float | None) -> bool:
        try:
            return bool(await self._probe(None, timeout, lambda c: c.is_server_ready))
        except _Probe as probe:
            return _ready_or_raise(probe.exc, probe.context)

    async def model_ready(self, model: str, version: str, timeout: float | None) -> bool:
        def make(c: Any) -> Any:
            return lambda **kw: c.is_model_ready(model, version, **kw)

        try:
            return bool(await self._probe(model, timeout, make))
        except _Probe as probe:
            return _ready_or_raise(probe.exc, probe.context)

    async def model_metadata(
        self, model: str, version: str, timeout: float | None
    ) -> dict[str, Any]:
        extra = {"as_json": True} if self.endpoint.protocol == "grpc" else {}

        def make(c: Any) -> Any:
            return lambda **kw: c.get_model_metadata(model, version, **extra, **kw)

        try:
            return await self._probe(model, timeout, make)
        except _Probe as probe:
            raise translate_error(probe.exc, probe.context) from probe.exc

    async def close(self) -> None:
        if self.pool is not None:
            regions = self.pool.drain()
            if regions:  # as the sync twin: on a new connection if a failure dropped it
                with contextlib.suppress(Exception):
                    unregister = getattr(self._client(), self.unregister_name())
                    for region in regions:
                        await self._unregister(unregister, region)
            for region in regions:
                with contextlib.suppress(Exception):
                    self.pool.destroy(region)
        await self._reset()

    async def _unregister(self, unregister: Callable[..., Any], region: Region) -> None:
        """The sync twin's ``_unregister``, with the pauses awaited."""
        failure = await unregister_waiting_async(unregister, region.name, headers=self.headers())
        if failure is not None and still_in_use(failure):
            still_registered(region.name, failure)
