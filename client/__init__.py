"""Typed Python SDK for the kit's models on Triton, over gRPC or HTTP.

from client import TritonClient
with TritonClient("grpc://127.0.0.1:8001") as triton:
    print(triton.classify("cat.jpg").top)
"""

from client.aio import AsyncTritonClient
from client.errors import (
    DeadlineExceededError,
    InvalidInputError,
    ModelUnavailableError,
    ServerError,
    TritonClientError,
)
from client.sync import TritonClient
from client.types import Classification, Prediction, Timeout

__all__ = [
    "AsyncTritonClient",
    "Classification",
    "DeadlineExceededError",
    "InvalidInputError",
    "ModelUnavailableError",
    "Prediction",
    "ServerError",
    "Timeout",
    "TritonClient",
    "TritonClientError",
]
