"""Blocking client: ``TritonClient("grpc://localhost:8001").classify("cat.jpg")``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from client import codecs
from client.base import ClientBase, as_list, raise_first, stack_embeddings
from client.codecs import Call, ImageInput
from client.errors import DeadlineExceededError, TritonClientError
from client.transport import Transport
from client.types import Classification, Timeout

T = TypeVar("T")


class TritonClient(ClientBase):
    """Typed access to the kit's models over gRPC or HTTP (picked from the URL scheme).

    Batch methods send one request per item, concurrently, so Triton's dynamic
    batcher can group them and one bad item fails only itself.
    """

    def __init__(self, url: str, timeout: float | Timeout | None = None, **kwargs: Any) -> None:
        super().__init__(url, timeout, **kwargs)
        self._local = threading.local()
        self._transports: list[Transport] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # -- plumbing ------------------------------------------------------------
    def _transport(self) -> Transport:
        transport = getattr(self._local, "transport", None)
        if transport is None:
            transport = Transport(self.endpoint, self.timeout)
            self._local.transport = transport
            with self._lock:
                self._transports.append(transport)
        return transport

    def _infer(self, call: Call, timeout: float | Timeout | None) -> dict[str, np.ndarray]:
        return self._transport().infer(call, Timeout.of(timeout, self.timeout))

    def _map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T | TritonClientError]:
        def guarded(item: Any) -> T | TritonClientError:
            try:
                return fn(item)
            except TritonClientError as exc:
                return exc

        if len(items) <= 1:
            return [guarded(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="triton")
        return list(self._pool.map(guarded, items))

    # -- models ------------------------------------------------------------
    def classify(
        self, image: ImageInput, top_k: int = 5, *, timeout: float | Timeout | None = None
    ) -> Classification:
        """Top-k ImageNet classes for encoded image bytes, a file path or a PIL image."""
        call = codecs.classify_call(image, top_k, self.models["classify"])
        return codecs.parse_classification(self._infer(call, timeout), top_k)

    def classify_batch(
        self,
        images: Sequence[ImageInput],
        top_k: int = 5,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> list[Classification | TritonClientError]:
        """``classify`` per image; ``return_exceptions`` returns failures in place."""
        results = self._map(lambda image: self.classify(image, top_k, timeout=timeout), images)
        return results if return_exceptions else raise_first(results)

    def embed(
        self, texts: str | Sequence[str], *, timeout: float | Timeout | None = None
    ) -> np.ndarray:
        """L2-normalised sentence embeddings, shape (n, hidden)."""

        def one(text: str) -> np.ndarray:
            call = codecs.embed_call(text, self.models["embed"])
            return codecs.parse_embedding(self._infer(call, timeout))

        return stack_embeddings(raise_first(self._map(one, as_list(texts))))

    def translate(
        self,
        texts: str | Sequence[str],
        beam_size: int = 4,
        max_length: int | None = None,
        *,
        timeout: float | Timeout | None = None,
        model: str | None = None,
    ) -> list[str]:
        """Translations in input order; ``beam_size=1`` is greedy decoding; ``model``
        picks another translation model with nmt's inputs (e.g. ``"nmt_rnn"``)."""
        name = model or self.models["translate"]

        def one(text: str) -> str:
            call = codecs.translate_call(text, beam_size, max_length, name)
            return codecs.parse_translation(self._infer(call, timeout))

        return raise_first(self._map(one, as_list(texts)))

    # -- server ------------------------------------------------------------
    def server_ready(self) -> bool:
        return self._transport().server_ready()

    def model_ready(self, model: str) -> bool:
        return self._transport().model_ready(model)

    def model_metadata(self, model: str) -> dict[str, Any]:
        return self._transport().model_metadata(model)

    def wait_until_ready(self, timeout: float = 60.0, models: Sequence[str] = ()) -> None:
        """Block until the server (and the given models) report ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server_ready() and all(self.model_ready(m) for m in models):
                return
            time.sleep(0.25)
        raise DeadlineExceededError(f"{self.url} not ready after {timeout:.0f} s")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            for transport in self._transports:
                transport.close()
            self._transports.clear()
        self._local = threading.local()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
