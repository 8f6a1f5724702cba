"""Why the embedded server could not start or stay up, as distinct exception types."""

from __future__ import annotations


class ServerError(RuntimeError):
    """Base class for everything the launcher raises."""


class BinaryNotFoundError(ServerError):
    """No tritonserver executable could be located."""


class PortInUseError(ServerError):
    """A port the server needs is already bound by another process."""


class BackendUnavailableError(ServerError):
    """A model needs one of Triton's own backends that is not built or not current."""


class ModelLoadError(ServerError):
    """Triton started but one or more models failed to load."""

    def __init__(self, failures: dict[str, str], log_file: str | None = None) -> None:
        self.failures = failures
        lines = [f"model '{name}' failed to load: {reason}" for name, reason in failures.items()]
        if log_file:
            lines.append(f"full server log: {log_file}")
        super().__init__("\n".join(lines))


class StartupTimeoutError(ServerError):
    """The server did not become ready in time."""


class ServerExitedError(ServerError):
    """The server process exited during start-up for a reason other than a model failure."""


class PlanMismatchError(ServerError):
    """A TensorRT plan's sidecar does not match the TensorRT version or GPU visible here."""
