"""asyncio client, the twin of ``TritonClient``: ``await client.classify(...)``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from client import codecs
from client.base import ClientBase, as_list, raise_first, stack_embeddings
from client.codecs import Call, ImageInput
from client.errors import DeadlineExceededError, TritonClientError
from client.transport import AsyncTransport
from client.types import Classification, Timeout

T = TypeVar("T")


class AsyncTritonClient(ClientBase):
    """Same methods as ``TritonClient``, awaitable; one connection shared by all tasks."""

    def __init__(self, url: str, timeout: float | Timeout | None = None, **kwargs: Any) -> None:
        super().__init__(url, timeout, **kwargs)
        self._transport = AsyncTransport(self.endpoint, self.timeout)

    async def _infer(self, call: Call, timeout: float | Timeout | None) -> dict[str, np.ndarray]:
        return await self._transport.infer(call, Timeout.of(timeout, self.timeout))

    async def _map(
        self, fn: Callable[[Any], Awaitable[T]], items: Sequence[Any]
    ) -> list[T | TritonClientError]:
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
        call = codecs.classify_call(image, top_k, self.models["classify"])
        return codecs.parse_classification(await self._infer(call, timeout), top_k)

    async def classify_batch(
        self,
        images: Sequence[ImageInput],
        top_k: int = 5,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> list[Classification | TritonClientError]:
        results = await self._map(lambda im: self.classify(im, top_k, timeout=timeout), images)
        return results if return_exceptions else raise_first(results)

    async def embed(
        self, texts: str | Sequence[str], *, timeout: float | Timeout | None = None
    ) -> np.ndarray:
        async def one(text: str) -> np.ndarray:
            call = codecs.embed_call(text, self.models["embed"])
            return codecs.parse_embedding(await self._infer(call, timeout))

        return stack_embeddings(raise_first(await self._map(one, as_list(texts))))

    async def translate(
        self,
        texts: str | Sequence[str],
        beam_size: int = 4,
        max_length: int | None = None,
        *,
        timeout: float | Timeout | None = None,
        model: str | None = None,
    ) -> list[str]:
        name = model or self.models["translate"]

        async def one(text: str) -> str:
            call = codecs.translate_call(text, beam_size, max_length, name)
            return codecs.parse_translation(await self._infer(call, timeout))

        return raise_first(await self._map(one, as_list(texts)))

    async def server_ready(self) -> bool:
        return await self._transport.server_ready()

    async def model_ready(self, model: str) -> bool:
        return await self._transport.model_ready(model)

    async def model_metadata(self, model: str) -> dict[str, Any]:
        return await self._transport.model_metadata(model)

    async def wait_until_ready(self, timeout: float = 60.0, models: Sequence[str] = ()) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.server_ready() and all([await self.model_ready(m) for m in models]):
                return
            await asyncio.sleep(0.25)
        raise DeadlineExceededError(f"{self.url} not ready after {timeout:.0f} s")

    async def close(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
