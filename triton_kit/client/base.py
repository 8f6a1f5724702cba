"""What the sync and async clients share: options, request building, result assembly.

Everything here is free of I/O, as httpx's models are shared by its ``Client`` and
``AsyncClient``: the twins (``sync.TritonClient``, ``aio.AsyncTritonClient``) add only how they
wait, on threads or as tasks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from triton_kit.client import codecs
from triton_kit.client.codecs import Call
from triton_kit.client.errors import ClientClosedError, ConfigurationError, TritonClientError
from triton_kit.client.options import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_SHARED_MEMORY_THRESHOLD,
    MODEL_KEYS,
    TLS,
    ClientOptions,
    Retry,
    SharedMemoryKind,
)
from triton_kit.client.shm import check_available
from triton_kit.client.transport import ClientFactory, Endpoint, Request
from triton_kit.client.types import Classification, Timeout

R = TypeVar("R")

# wait_until_ready: the longest one probe may take, and the pause between probes (seconds).
PROBE_LIMIT_S = 5.0
PROBE_PAUSE_S = 0.25


def build_options(
    timeout: float | Timeout | None,
    max_concurrency: int,
    models: Mapping[str, str] | None,
    versions: Mapping[str, str | int] | None,
    headers: Mapping[str, str] | None,
    retry: Retry | int | None,
    tls: TLS | None,
    compression: str | None,
    shared_memory: SharedMemoryKind | None,
    shared_memory_threshold: int,
    cuda_device: int,
    api_key: str | None = None,
) -> ClientOptions:
    """The twins' keyword arguments, validated into one frozen value."""
    unknown = set(models or {}) - set(MODEL_KEYS)
    if unknown:
        raise ConfigurationError(
            f"models= keys must be among {sorted(MODEL_KEYS)}, got {sorted(unknown)}"
        )
    return ClientOptions(
        timeout=Timeout.of(timeout, Timeout()),
        max_concurrency=max_concurrency,
        models={**MODEL_KEYS, **(models or {})},
        versions={name: str(v) for name, v in (versions or {}).items()},
        headers=dict(headers or {}),
        retry=Retry.of(retry),
        tls=tls,
        compression=compression,
        shared_memory=shared_memory,
        shared_memory_threshold=shared_memory_threshold,
        cuda_device=cuda_device,
        api_key=api_key,
    )


@dataclass(frozen=True)
class Codec(Generic[R]):
    """One SDK method's item: the request it becomes and what its response is read into.
    Either step raises the item's own error (InvalidInputError for a bad one)."""

    encode: Callable[[Any], Call]
    decode: Callable[[dict[str, np.ndarray]], R]


class ClientBase:
    """Holds the endpoint and options, builds requests and reads responses; subclasses add
    the I/O style (``_start`` sets up their transport)."""

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
        self.endpoint = Endpoint.parse(url)
        check_available(options.shared_memory, options.cuda_device)
        self.url = url
        self.options = options
        self.client_factory = client_factory
        self.closed = False
        self._hidden_size: int | None = None
        self._start()

    def _start(self) -> None:
        """Set up the subclass's transport(s); called once, at the end of ``__init__``."""

    @property
    def timeout(self) -> Timeout:
        return self.options.timeout

    @property
    def max_concurrency(self) -> int:
        return self.options.max_concurrency

    @property
    def models(self) -> Mapping[str, str]:
        return self.options.models

    @property
    def protocol(self) -> str:
        return self.endpoint.protocol

    def _check_open(self) -> None:
        if self.closed:
            raise ClientClosedError(f"{self.url}: the client is closed", url=self.url)

    def _request(
        self,
        call: Call,
        timeout: float | Timeout | None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        version: str | int | None = None,
        idempotent: bool = True,
    ) -> Request:
        self._check_open()
        return Request(
            call,
            Timeout.of(timeout, self.options.timeout),
            request_id or "",  # Triton puts an id in each error message: only on request
            headers,
            None if version is None else str(version),
            idempotent,
        )

    def _version(self, model: str, version: str | int | None) -> str:
        return self.options.version_of(model) if version is None else str(version)

    def _probe_timeout(self, timeout: float | None) -> float | None:
        return self.timeout.request if timeout is None else timeout

    # -- what each SDK method sends and reads ----------------------------------------------
    def _classifier(self, top_k: int) -> Codec[Classification]:
        """An encoded image to ``models["classify"]``, a decoded one to ``classify_uint8``."""
        return Codec(
            lambda image: codecs.classify_call(
                image, top_k, self.models["classify"], self.models["classify_uint8"]
            ),
            lambda outputs: codecs.parse_classification(outputs, top_k),
        )

    def _embedder(self) -> Codec[np.ndarray]:
        return Codec(
            lambda text: codecs.embed_call(text, self.models["embed"]), codecs.parse_embedding
        )

    def _translator(self, beam_size: int, max_length: int | None, model: str | None) -> Codec[str]:
        name = model or self.models["translate"]
        return Codec(
            lambda text: codecs.translate_call(text, beam_size, max_length, name),
            codecs.parse_translation,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def as_list(items: Any) -> tuple[list, bool]:
    """A single text or bytes is one item (``single=True``); any other sequence is a batch."""
    if isinstance(items, (str, bytes, bytearray)):
        return [items], True
    if isinstance(items, np.ndarray) or not isinstance(items, Sequence):
        from triton_kit.client.errors import InvalidInputError

        raise InvalidInputError(
            f"expected a str/bytes or a list of them, got {type(items).__name__}",
            "INVALID_ARGUMENT",
        )
    return list(items), False


def raise_first(results: list, single: bool = False) -> list:
    """Re-raise the first failed item; in a batch, say which item it was."""
    for index, result in enumerate(results):
        if isinstance(result, TritonClientError):
            if single:
                raise result
            raise result.renamed(f"item {index}: {result}") from result
        if isinstance(result, BaseException):
            raise result
    return results


def hidden_size(metadata: Mapping[str, Any], output: str = "EMBEDDING") -> int:
    """The embedding width from the model's metadata (for an empty batch's shape)."""
    for tensor in metadata.get("outputs", []):
        if tensor.get("name") == output:
            return int(tensor["shape"][-1])
    raise TritonClientError(f"model metadata has no {output} output: {metadata}")


def stack_embeddings(rows: list[np.ndarray], hidden: int | None = None) -> np.ndarray:
    if rows:
        return np.stack(rows)
    return np.zeros((0, hidden or 0), dtype=np.float32)


def probes(timeout: float) -> Iterator[tuple[float, float]]:
    """``wait_until_ready``'s schedule within ``timeout`` seconds: per probe, how long it may
    take and how long to pause after it fails; never past the limit."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        yield min(left, PROBE_LIMIT_S), min(PROBE_PAUSE_S, max(left, 0.0))
