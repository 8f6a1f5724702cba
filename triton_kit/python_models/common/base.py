"""The one base class behind every python-backend model in this project.

Why a base: Triton's python backend hands ``execute`` a list of requests. An
exception raised from ``execute`` fails *all* of them, so bad input must instead
become an error on that request's own response while the rest of the batch is
served. The base does that bookkeeping once; subclasses only transform arrays.
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.python_models.common.parameters import ModelParameters

try:  # Present only inside Triton's python stub.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - pure functions stay importable for tests
    pb_utils = None

Arrays = dict[str, np.ndarray]


class InvalidInput(ValueError):
    """The request's content is wrong; reported as INVALID_ARG on that request only."""


def error_response(exc: BaseException) -> Any:
    """An InferenceResponse carrying an error, with the code that fits the exception."""
    if isinstance(exc, InvalidInput):
        code = pb_utils.TritonError.INVALID_ARG
        message = str(exc)
    else:
        code = pb_utils.TritonError.INTERNAL
        message = f"{type(exc).__name__}: {exc}"
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


def array_response(outputs: Arrays, dtypes: dict[str, np.dtype]) -> Any:
    tensors = [_tensor(name, value, dtypes.get(name)) for name, value in outputs.items()]
    return pb_utils.InferenceResponse(output_tensors=tensors)


def _tensor(name: str, value: Any, dtype: np.dtype | None) -> Any:
    """A numpy array is copied into the stub's shared memory. Anything else with
    ``__dlpack__`` (a torch tensor: a model that keeps an output on its GPU) goes through
    ``Tensor.from_dlpack`` where it is; it must already have the config's dtype and be
    C-contiguous."""
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        return pb_utils.Tensor.from_dlpack(name, value)
    dtype = value.dtype if dtype is None else dtype
    return pb_utils.Tensor(name, np.ascontiguousarray(value, dtype=dtype))


def require_numpy_1(version: str = np.__version__) -> None:
    """Triton 2.51's python stub needs numpy<2 (nvidia-pytriton pins it; 24.10 ships 1.x).

    Seen on the H100 machine with numpy 2.5 in the stub: ``as_numpy()`` read every input as
    its first element repeated and ``pb_utils.Tensor`` outputs came back empty, silently.
    Refusing to load says so instead of serving wrong numbers.
    """
    if int(version.split(".")[0]) >= 2:
        raise RuntimeError(
            f"numpy {version} in the python backend's environment: Triton 2.51's stub needs "
            "numpy<2 (wrong values otherwise). Give the stubs a numpy<2 environment, e.g. "
            "TRITON_KIT_STUB_PYTHON=<venv>/bin/python3 (scripts/gpu/bench.sh does this)."
        )


PROFILE_DIR_ENV = "TRITON_KIT_PROFILE_DIR"


class ExecuteProfile:
    """Seconds per phase of ``execute``, summed per instance and written as JSON now and then.

    On only when ``TRITON_KIT_PROFILE_DIR`` is set (triton_kit/benchmarks/gpu/overhead.py): Triton's
    statistics give one "compute infer" figure for a python model; this splits it into
    reading inputs, the model's own phases and building responses.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)
        self.executes = 0
        self.requests = 0

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] += seconds

    def executed(self, requests: int) -> None:
        self.executes += 1
        self.requests += requests
        if self.executes % 100 == 0:
            self.flush()

    def flush(self) -> None:
        ms = {k: round(v * 1e3 / max(self.executes, 1), 4) for k, v in self.seconds.items()}
        summary = {"executes": self.executes, "requests": self.requests, "ms_per_execute": ms}
        self.path.write_text(json.dumps(summary) + "\n")


class PythonModel:
    """Parse the config once; isolate errors per request.

    Subclasses override :meth:`setup` (load resources) and either
    :meth:`process_one` (one request's arrays in, arrays out) or
    :meth:`process_batch` (all requests of an execute call at once, for models
    that gain from batching across requests, such as tokenizers).
    """

    logger = logging.getLogger("python_models")

    def initialize(self, args: dict[str, str]) -> None:
        require_numpy_1()
        self.model_config: dict[str, Any] = json.loads(args["model_config"])
        self.model_name: str = args["model_name"]
        self.version_dir = Path(args["model_repository"]) / args["model_version"]
        self.params = ModelParameters.from_config(self.model_config)
        self.max_batch_size = int(self.model_config.get("max_batch_size", 0))
        self.input_names = [spec["name"] for spec in self.model_config.get("input", [])]
        self.optional_inputs = {
            spec["name"] for spec in self.model_config.get("input", []) if spec.get("optional")
        }
        self.output_dtypes = {
            spec["name"]: np.dtype(pb_utils.triton_string_to_numpy(spec["data_type"]))
            for spec in self.model_config.get("output", [])
        }
        profile_dir = os.environ.get(PROFILE_DIR_ENV)
        self.profile = (
            ExecuteProfile(Path(profile_dir) / f"{self.model_name}-{os.getpid()}.json")
            if profile_dir
            else None
        )
        self.setup()

    def setup(self) -> None:
        """Load resources; parameters are in ``self.params``."""

    def read_inputs(self, request: Any) -> Arrays:
        arrays: Arrays = {}
        for name in self.input_names:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is None:
                if name in self.optional_inputs:
                    continue
                raise InvalidInput(f"missing input '{name}'")
            arrays[name] = tensor.as_numpy()
        return arrays

    def process_one(self, inputs: Arrays) -> Arrays:
        raise NotImplementedError

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        """Default: one request at a time, each failure kept to its own request."""
        results: list[Arrays | Exception] = []
        for inputs in batch:
            try:
                results.append(self.process_one(inputs))
            except Exception as exc:
                results.append(self._note(exc))
        return results

    def execute(self, requests: list[Any]) -> list[Any]:
        if self.profile is None:
            return self._execute(requests)
        start = time.perf_counter()
        responses = self._execute(requests)
        self.profile.add("execute", time.perf_counter() - start)
        self.profile.executed(len(requests))
        return responses

    def timed(self, phase: str, start: float) -> float:
        """Add the time since ``start`` to ``phase`` when profiling; returns now."""
        now = time.perf_counter()
        if self.profile is not None:
            self.profile.add(phase, now - start)
        return now

    def _execute(self, requests: list[Any]) -> list[Any]:
        responses: list[Any] = [None] * len(requests)
        start = time.perf_counter()
        pending: list[tuple[int, Arrays]] = []
        for index, request in enumerate(requests):
            try:
                pending.append((index, self.read_inputs(request)))
            except Exception as exc:
                responses[index] = error_response(self._note(exc))
        start = self.timed("read_inputs", start)
        if pending:
            try:
                results = self.process_batch([inputs for _, inputs in pending])
            except Exception as exc:
                results = [self._note(exc)] * len(pending)
            start = self.timed("process_batch", start)
            for (index, _), result in zip(pending, results, strict=False):
                responses[index] = (
                    error_response(result)
                    if isinstance(result, Exception)
                    else array_response(result, self.output_dtypes)
                )
            self.timed("responses", start)
        return responses

    def _note(self, exc: Exception) -> Exception:
        if not isinstance(exc, InvalidInput):
            self.logger.error("%s: %s", self.model_name, traceback.format_exc())
        return exc

    def finalize(self) -> None:
        """Release resources; writes the execute profile when one is kept."""
        if self.profile is not None:
            self.profile.flush()
