"""Typed Python SDK for the kit's models on Triton, over gRPC or HTTP.

from triton_kit.client import TritonClient
with TritonClient("grpc://127.0.0.1:8001") as triton:
    print(triton.classify("cat.jpg").top)
"""

from triton_kit.client.aio import AsyncTritonClient
from triton_kit.client.errors import (
    ClientClosedError,
    ConfigurationError,
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    ServerConnectionError,
    ServerError,
    ServerOverloadedError,
    TritonClientError,
)
from triton_kit.client.options import TLS, Retry
from triton_kit.client.sync import TritonClient
from triton_kit.client.types import Classification, Prediction, Timeout

__all__ = [
    "TLS",
    "AsyncTritonClient",
    "Classification",
    "ClientClosedError",
    "ConfigurationError",
    "DeadlineExceededError",
    "InvalidInputError",
    "ModelUnavailableError",
    "Prediction",
    "Retry",
    "ServerConnectionError",
    "ServerError",
    "ServerOverloadedError",
    "Timeout",
    "TritonClient",
    "TritonClientError",
]
