"""What the sync and async clients share: URL, defaults, and how results are assembled."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from client.errors import TritonClientError
from client.transport import Endpoint
from client.types import Timeout

DEFAULT_MODELS = {"classify": "resnet50", "embed": "bert", "translate": "nmt"}


class ClientBase:
    """Holds the endpoint and defaults; subclasses add the I/O style."""

    def __init__(
        self,
        url: str,
        timeout: float | Timeout | None = None,
        max_concurrency: int = 16,
        models: dict[str, str] | None = None,
    ) -> None:
        self.endpoint = Endpoint.parse(url)
        self.url = url
        self.timeout = Timeout.of(timeout, Timeout())
        self.max_concurrency = max_concurrency
        self.models = {**DEFAULT_MODELS, **(models or {})}

    @property
    def protocol(self) -> str:
        return self.endpoint.protocol

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def as_list(items: str | bytes | Sequence) -> list:
    """A single text is one item; any other sequence is a batch."""
    return [items] if isinstance(items, (str, bytes)) else list(items)


def raise_first(results: list) -> list:
    """Re-raise the first failed item, saying which item it was."""
    for index, result in enumerate(results):
        if isinstance(result, TritonClientError):
            raise type(result)(f"item {index}: {result}", result.status) from result
        if isinstance(result, BaseException):
            raise result
    return results


def stack_embeddings(rows: list[np.ndarray]) -> np.ndarray:
    return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
