"""Parsed client options: frozen value objects, each default defined here once."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from triton_kit.client.errors import ConfigurationError
from triton_kit.client.types import Timeout

SharedMemoryKind = Literal["system", "cuda"]
# The ONE table of which model each SDK method calls by default; the load test's users and the
# tests read it from here.
DEFAULT_MODELS = {"classify": "resnet50", "embed": "bert", "translate": "nmt"}
# The same table by model family (a family is named after its entry model).
FAMILY_METHODS = {model: method for method, model in DEFAULT_MODELS.items()}
# Models for another input form of a method: classify() sends decoded images (numpy uint8
# RGB arrays, PIL images) as pixels to this one. Configured with models= like the others.
INPUT_VARIANT_MODELS = {"classify_uint8": "resnet50_uint8"}
MODEL_KEYS = {**DEFAULT_MODELS, **INPUT_VARIANT_MODELS}
DEFAULT_MAX_CONCURRENCY = 16
# Inputs at least this large travel through shared memory when it is on (1 MiB).
DEFAULT_SHARED_MEMORY_THRESHOLD = 1 << 20
# The kit's restricted-API key header (triton_kit/server/security.py holds the original; the client
# stays standalone, tests/unit/client/test_contracts.py checks the copy). Triton 2.51 expects
# gRPC metadata for restricted protocols under GRPC_HEADER_PREFIX.
API_KEY_HEADER = "triton-kit-api-key"
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
COMPRESSIONS = ("gzip", "deflate")


@dataclass(frozen=True)
class Retry:
    """Exponential backoff with full jitter for connection failures and overload.

    ``attempts`` counts the first try; every retry waits a random time in
    ``[0, min(max_backoff, backoff * 2**n)]`` and never past the call's deadline.
    ``Retry.off()`` (or ``retry=0``) disables it.
    """

    attempts: int = 3
    backoff: float = 0.05
    max_backoff: float = 1.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff < 0 or self.max_backoff < 0:
            raise ConfigurationError(f"invalid retry policy {self}: attempts >= 1, delays >= 0")

    @classmethod
    def off(cls) -> Retry:
        return cls(attempts=1)

    @classmethod
    def of(cls, value: Retry | int | None) -> Retry:
        """``None`` is the default policy; an int is the number of retries after the first try."""
        if value is None:
            return cls()
        if isinstance(value, Retry):
            return value
        return cls(attempts=int(value) + 1)

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The wait before each retry (one fewer than ``attempts``)."""
        rng = rng or random.Random()
        for n in range(self.attempts - 1):
            yield rng.uniform(0.0, min(self.max_backoff, self.backoff * 2**n))


@dataclass(frozen=True)
class TLS:
    """Certificates (file paths) for grpcs:// and https:// URLs, passed to tritonclient.

    ``insecure`` skips server verification (HTTP only; gRPC has no such switch).
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class ClientOptions:
    """Everything a client was configured with, validated once."""

    timeout: Timeout = field(default_factory=Timeout)
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    models: Mapping[str, str] = field(default_factory=lambda: dict(MODEL_KEYS))
    versions: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    retry: Retry = field(default_factory=Retry)
    tls: TLS | None = None
    compression: str | None = None
    shared_memory: SharedMemoryKind | None = None
    shared_memory_threshold: int = DEFAULT_SHARED_MEMORY_THRESHOLD
    cuda_device: int = 0
    api_key: str | None = None

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise ConfigurationError(
                f"compression must be one of {COMPRESSIONS} or None, got {self.compression!r}"
            )
        if self.shared_memory not in (None, "system", "cuda"):
            raise ConfigurationError(
                f"shared_memory must be 'system', 'cuda' or None, got {self.shared_memory!r}"
            )
        if self.shared_memory_threshold < 0:
            raise ConfigurationError("shared_memory_threshold must be >= 0 bytes")

    def version_of(self, model: str) -> str:
        """The pinned version of ``model`` ('' lets the server choose)."""
        return str(self.versions.get(model, ""))
