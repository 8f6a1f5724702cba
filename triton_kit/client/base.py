"""What the sync and async clients share: options, request building, result assembly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from triton_kit.client.codecs import Call
from triton_kit.client.errors import ClientClosedError, ConfigurationError, TritonClientError
from triton_kit.client.options import (
    MODEL_KEYS,
    TLS,
    ClientOptions,
    Retry,
    SharedMemoryKind,
)
from triton_kit.client.shm import check_available
from triton_kit.client.transport import ClientFactory, Endpoint, Request
from triton_kit.client.types import Timeout


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


class ClientBase:
    """Holds the endpoint and options; subclasses add the I/O style."""

    def __init__(self, url: str, options: ClientOptions, client_factory: ClientFactory | None):
        self.endpoint = Endpoint.parse(url)
        check_available(options.shared_memory, options.cuda_device)
        self.url = url
        self.options = options
        self.client_factory = client_factory
        self.closed = False
        self._hidden_size: int | None = None

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
