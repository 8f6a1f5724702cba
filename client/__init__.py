"""Typed Python SDK for the kit's models on Triton, over gRPC or HTTP.

from client import TritonClient
with TritonClient("grpc://127.0.0.1:8001") as triton:
    print(triton.classify("cat.jpg").top)
"""

from client.aio import AsyncTritonClient
from client.errors import (
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
from client.options import TLS, Retry
from client.sync import TritonClient
from client.types import Classification, Prediction, Timeout

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
