"""The one way this project opens an ONNX Runtime session: with the options Triton serves with.

Served ONNX models run in Triton's own onnxruntime backend, whose thread and execution-mode
parameters :meth:`SessionSettings.from_parameters` reads the same way. The python models
that run an engine in their stub (the ``bert`` encoder, the NMT search's sessions and
candidate graph), the NMT in-process search, the build's parity and accuracy checks and the
benchmarks all call :func:`create_session`, so a number measured in-process is measured on a
session configured like the served one. Python 3.10 (the 24.10 container's python stub runs
it there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Config parameters of Triton's native onnxruntime backend that set session options.
INTRA_OP = "intra_op_thread_count"
INTER_OP = "inter_op_thread_count"
EXECUTION_MODE = "execution_mode"
SESSION_CONFIG_PREFIX = "session."
# "0": idle intra-op pool threads sleep instead of spinning (ONNX Runtime session config key;
# the python-based backends honour it, the native onnxruntime backend does not read it).
ALLOW_SPINNING = "session.intra_op.allow_spinning"


@dataclass(frozen=True)
class SessionSettings:
    """Threads (0: ONNX Runtime's default), execution mode, and raw session config entries."""

    intra_op_threads: int = 0
    inter_op_threads: int = 0
    parallel: bool = False
    config_entries: Mapping[str, str] = field(default_factory=dict)
    log_severity: int = 3  # errors only: the build prints its own progress

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, str]) -> SessionSettings:
        """Settings from a model config's parameters, read as the native backend reads them."""
        return cls(
            intra_op_threads=int(parameters.get(INTRA_OP, 0) or 0),
            inter_op_threads=int(parameters.get(INTER_OP, 0) or 0),
            parallel=int(parameters.get(EXECUTION_MODE, 0) or 0) == 1,
            config_entries={
                k: v for k, v in parameters.items() if k.startswith(SESSION_CONFIG_PREFIX)
            },
        )


def session_options(settings: SessionSettings) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.intra_op_threads
    options.inter_op_num_threads = settings.inter_op_threads
    if settings.parallel:
        options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = settings.log_severity
    for key, value in settings.config_entries.items():
        options.add_session_config_entry(key, value)
    return options


def create_session(path: Path | str | bytes, settings: SessionSettings | None = None) -> Any:
    """A CPU ``InferenceSession`` of ``path`` (or a serialised model) with the served options."""
    import onnxruntime as ort

    options = session_options(settings or SessionSettings())
    source = path if isinstance(path, bytes) else str(path)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def threaded(threads: int) -> SessionSettings:
    """The settings the build writes for ``--threads N``: N intra-op threads, 1 inter-op."""
    return SessionSettings(intra_op_threads=threads, inter_op_threads=1 if threads else 0)
