"""asyncio client, the twin of ``TritonClient``: ``await client.classify(...)``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from triton_kit.client import codecs
from triton_kit.client.base import (
    ClientBase,
    as_list,
    build_options,
    hidden_size,
    raise_first,
    stack_embeddings,
)
from triton_kit.client.codecs import Call, ImageInput
from triton_kit.client.errors import TritonClientError, not_ready
from triton_kit.client.options import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_SHARED_MEMORY_THRESHOLD,
    TLS,
    Retry,
    SharedMemoryKind,
)
from triton_kit.client.transport import AsyncTransport, ClientFactory
from triton_kit.client.types import Classification, Timeout

T = TypeVar("T")


class AsyncTritonClient(ClientBase):
    """Same methods and arguments as ``TritonClient``, awaitable; one connection for all tasks.

    Raises:
        ConfigurationError: a bad URL or option.
    """

    def __init__(
        self,
        url: str,
        timeout: float | Timeout | None = None,
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        models: Mapping[str, str] | None = None,
        versions: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        retry: Retry | int | None = None,
        tls: TLS | None = None,
        compression: str | None = None,
        shared_memory: SharedMemoryKind | None = None,
        shared_memory_threshold: int = DEFAULT_SHARED_MEMORY_THRESHOLD,
        cuda_device: int = 0,
        api_key: str | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        options = build_options(
            timeout, max_concurrency, models, versions, headers, retry, tls,
            compression, shared_memory, shared_memory_threshold, cuda_device, api_key,
        )  # fmt: skip
        super().__init__(url, options, client_factory)
        self._transport = AsyncTransport(self.endpoint, self.options, client_factory)

    async def _infer(self, call: Call, timeout: float | Timeout | None) -> dict[str, np.ndarray]:
        return await self._transport.infer(self._request(call, timeout))

    async def _map(
        self, fn: Callable[[Any], Awaitable[T]], items: Sequence[Any]
    ) -> list[T | TritonClientError]:
        self._check_open()
        if len(items) == 1:  # one call: no tasks to bound (a task and a gather cost ~30 us)
            try:
                return [await fn(items[0])]
            except TritonClientError as exc:
                return [exc]
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def guarded(item: Any) -> T | TritonClientError:
            async with semaphore:
                try:
                    return await fn(item)
                except TritonClientError as exc:
                    return exc

        return list(await asyncio.gather(*(guarded(item) for item in items)))

    async def classify(
        self, image: ImageInput, top_k: int = 5, *, timeout: float | Timeout | None = None
    ) -> Classification:
        """As ``TritonClient.classify``; raises the same errors."""
        call = codecs.classify_call(
            image, top_k, self.models["classify"], self.models["classify_uint8"]
        )
        return codecs.parse_classification(await self._infer(call, timeout), top_k)

    async def classify_batch(
        self,
        images: Sequence[ImageInput],
        top_k: int = 5,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> list[Classification | TritonClientError]:
        """As ``TritonClient.classify_batch``; raises the same errors."""
        results = await self._map(lambda im: self.classify(im, top_k, timeout=timeout), images)
        return results if return_exceptions else raise_first(results)

    async def embed(
        self,
        texts: str | bytes | Sequence[str | bytes],
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> Any:
        """As ``TritonClient.embed``; raises the same errors."""
        items, single = as_list(texts)

        async def one(text: str | bytes) -> np.ndarray:
            call = codecs.embed_call(text, self.models["embed"])
            return codecs.parse_embedding(await self._infer(call, timeout))

        results = await self._map(one, items)
        if return_exceptions:
            return results
        rows = raise_first(results, single)
        return stack_embeddings(rows, None if rows else await self._embedding_width(timeout))

    async def _embedding_width(self, timeout: float | Timeout | None) -> int:
        if self._hidden_size is None:
            request = Timeout.of(timeout, self.timeout).request
            metadata = await self.model_metadata(self.models["embed"], timeout=request)
            self._hidden_size = hidden_size(metadata)
        return self._hidden_size

    async def translate(
        self,
        texts: str | bytes | Sequence[str | bytes],
        beam_size: int = 4,
        max_length: int | None = None,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
        model: str | None = None,
    ) -> list[Any]:
        """As ``TritonClient.translate``; raises the same errors."""
        items, single = as_list(texts)
        name = model or self.models["translate"]

        async def one(text: str | bytes) -> str:
            call = codecs.translate_call(text, beam_size, max_length, name)
            return codecs.parse_translation(await self._infer(call, timeout))

        results = await self._map(one, items)
        return results if return_exceptions else raise_first(results, single)

    async def infer(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        outputs: Sequence[str] = (),
        *,
        model_version: str | int | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | Timeout | None = None,
        idempotent: bool = True,
    ) -> dict[str, np.ndarray]:
        """As ``TritonClient.infer``; raises the same errors."""
        call = Call(model, dict(inputs), tuple(outputs))
        request = self._request(call, timeout, request_id, headers, model_version, idempotent)
        return await self._transport.infer(request)

    async def server_ready(self, *, timeout: float | None = None) -> bool:
        """As ``TritonClient.server_ready``; raises the same errors."""
        self._check_open()
        return await self._transport.server_ready(self._probe_timeout(timeout))

    async def model_ready(
        self, model: str, *, version: str | int | None = None, timeout: float | None = None
    ) -> bool:
        """As ``TritonClient.model_ready``; raises the same errors."""
        self._check_open()
        return await self._transport.model_ready(
            model, self._version(model, version), self._probe_timeout(timeout)
        )

    async def model_metadata(
        self, model: str, *, version: str | int | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """As ``TritonClient.model_metadata``; raises the same errors."""
        self._check_open()
        return await self._transport.model_metadata(
            model, self._version(model, version), self._probe_timeout(timeout)
        )

    def _probe_timeout(self, timeout: float | None) -> float | None:
        return self.timeout.request if timeout is None else timeout

    async def wait_until_ready(self, timeout: float = 60.0, models: Sequence[str] = ()) -> None:
        """As ``TritonClient.wait_until_ready``; raises the same errors."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            probe = min(left, 5.0)
            if await self.server_ready(timeout=probe) and all(
                [await self.model_ready(m, timeout=probe) for m in models]
            ):
                return
            await asyncio.sleep(min(0.25, max(left, 0.0)))
        raise not_ready(self.url, timeout)

    async def close(self) -> None:
        """Release the connection and shared memory; later calls raise ClientClosedError."""
        self.closed = True
        await self._transport.close()

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
