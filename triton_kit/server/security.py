"""The restricted-API contract: which endpoints need a key, and the header that carries it.

Triton's shared-memory, model-repository and logging endpoints let a client crash
the server (registering a backend's own region) or change it (load/unload, log
verbosity). The launcher restricts them on HTTP and gRPC; a client that needs
them (e.g. tritonclient's system shared memory) sends ``API_KEY_HEADER: <key>``.
"""

from __future__ import annotations

import os
import secrets

API_KEY_HEADER = "triton-kit-api-key"
API_KEY_ENV = "TRITON_KIT_API_KEY"
RESTRICTED_APIS = ("shared-memory", "model-repository", "logging")


def api_key_from_env() -> str:
    """The key from ``TRITON_KIT_API_KEY``, else a random one (nobody else can use them)."""
    return os.environ.get(API_KEY_ENV) or secrets.token_urlsafe(24)


def restricted_api_args(key: str) -> list[str]:
    """tritonserver flags restricting :data:`RESTRICTED_APIS` to holders of ``key``."""
    apis = ",".join(RESTRICTED_APIS)
    return [
        f"--http-restricted-api={apis}:{API_KEY_HEADER}={key}",
        f"--grpc-restricted-protocol={apis}:{API_KEY_HEADER}={key}",
    ]


# Triton 2.51 matches gRPC metadata for restricted protocols under this prefix
# (checked live in tests/integration/deploy/test_k8s.py and
# tests/integration/reliability/test_lifecycle.py).
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"


def api_key_headers(key: str, protocol: str = "http") -> dict[str, str]:
    """Headers for tritonclient calls to a restricted endpoint over ``protocol``."""
    prefix = GRPC_HEADER_PREFIX if protocol == "grpc" else ""
    return {prefix + API_KEY_HEADER: key}
