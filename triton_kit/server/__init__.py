"""Run a real Triton Inference Server: the container's, or the one in the nvidia-pytriton wheel."""

from triton_kit.server.errors import (
    BackendUnavailableError,
    BinaryNotFoundError,
    ModelLoadError,
    PortInUseError,
    ServerError,
    ServerExitedError,
    StartupTimeoutError,
)
from triton_kit.server.launcher import ServerConfig, TritonServer, free_port, free_ports

__all__ = [
    "BackendUnavailableError",
    "BinaryNotFoundError",
    "ModelLoadError",
    "PortInUseError",
    "ServerConfig",
    "ServerError",
    "ServerExitedError",
    "StartupTimeoutError",
    "TritonServer",
    "free_port",
    "free_ports",
]
