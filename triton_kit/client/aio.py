"""asyncio client, the twin of ``TritonClient``: ``await client.classify(...)``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from triton_kit.client.base import (
    ClientBase,
    Codec,
    as_list,
    hidden_size,
    probes,
    raise_first,
    stack_embeddings,
)
from triton_kit.client.codecs import Call, ImageInput
from triton_kit.client.errors import TritonClientError, not_ready
from triton_kit.client.transport import AsyncTransport
from triton_kit.client.types import Classification, Timeout

R = TypeVar("R")
T = TypeVar("T")


class AsyncTritonClient(ClientBase):
    """Same methods and arguments as ``TritonClient``, awaitable; one connection for all tasks.

    Raises:
        ConfigurationError: a bad URL or option.
    """

    def _start(self) -> None:
        self._transport = AsyncTransport(self.endpoint, self.options, self.client_factory)

    async def _infer(self, call: Call, timeout: float | Timeout | None) -> dict[str, np.ndarray]:
        return await self._transport.infer(self._request(call, timeout))

    async def _one(self, codec: Codec[R], item: Any, timeout: float | Timeout | None) -> R:
        return codec.decode(await self._infer(codec.encode(item), timeout))

    async def _each(
        self, codec: Codec[R], items: Sequence[Any], timeout: float | Timeout | None
    ) -> list[R | TritonClientError]:
        return await self._map(lambda item: self._one(codec, item, timeout), items)

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
        return await self._one(self._classifier(top_k), image, timeout)

    async def classify_batch(
        self,
        images: Sequence[ImageInput],
        top_k: int = 5,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> list[Classification | TritonClientError]:
        """As ``TritonClient.classify_batch``; raises the same errors."""
        results = await self._each(self._classifier(top_k), images, timeout)
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
        results = await self._each(self._embedder(), items, timeout)
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
        results = await self._each(self._translator(beam_size, max_length, model), items, timeout)
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

    async def wait_until_ready(self, timeout: float = 60.0, models: Sequence[str] = ()) -> None:
        """As ``TritonClient.wait_until_ready``; raises the same errors."""
        for probe, pause in probes(timeout):
            if await self.server_ready(timeout=probe) and all(
                [await self.model_ready(m, timeout=probe) for m in models]
            ):
                return
            await asyncio.sleep(pause)
        raise not_ready(self.url, timeout)

    async def close(self) -> None:
        """Release the connection and shared memory; later calls raise ClientClosedError."""
        self.closed = True
        await self._transport.close()

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
