"""A test-only stand-in for ``triton_python_backend_utils`` (``pb_utils``).

That module exists only inside Triton's python stub: the stub imports the pure-Python file
the python backend ships (``triton_python_backend_utils.py``: the dtype tables, BYTES
(de)serialisation, ``get_input_tensor_by_name``, ``triton_string_to_numpy``, the flag
constants) and adds to it the C++ classes of its pybind11 module ``c_python_backend_utils``
(``Tensor``, ``TritonError``, ``InferenceRequest``, ``InferenceResponse``, the response
sender, ``Logger``, ...). Here the pure-Python half is that same file, loaded from the
nvidia-pytriton wheel (the file the embedded server runs). The C++ half holds only what this
project's models call, written after the stub's bindings (python_backend r24.10
``src/pb_stub.cc``, ``src/pb_tensor.cc``): the ``TritonError`` codes are
``TRITONSERVER_Error_Code``'s values, a ``Tensor`` refuses an empty name, makes its array
C-contiguous and serialises BYTES with the file's ``serialize_byte_tensor``;
:func:`received` gives what the other side of the IPC reads.

Why a stand-in is allowed here: the mutation tests (docs/TESTING.md) must run without a
server, thousands of times; the server-backed tests (``test_bert.py``, ``test_nmt_triton.py``
and the rest) run the same models in the real stub, so a gap between the two shows there.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

MODULE = "triton_python_backend_utils"


def real_utils_file() -> Path:
    """The pure-Python ``triton_python_backend_utils.py`` that the wheel's stub imports."""
    pytriton = pytest.importorskip("pytriton")
    path = Path(pytriton.__file__).parent / "tritonserver/backends/python" / f"{MODULE}.py"
    if not path.is_file():
        pytest.skip(f"no {path}")
    return path


class TritonModelException(Exception):
    """``c_python_backend_utils.TritonModelException``: what the stub raises on misuse."""


class ErrorCode(IntEnum):
    """``TRITONSERVER_Error_Code`` (tritonserver.h), as the stub exports it on TritonError."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


class TritonError:
    """``TritonError(message, code=INTERNAL)``; neither may be None."""

    UNKNOWN = ErrorCode.UNKNOWN
    INTERNAL = ErrorCode.INTERNAL
    NOT_FOUND = ErrorCode.NOT_FOUND
    INVALID_ARG = ErrorCode.INVALID_ARG
    UNAVAILABLE = ErrorCode.UNAVAILABLE
    UNSUPPORTED = ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = ErrorCode.ALREADY_EXISTS
    CANCELLED = ErrorCode.CANCELLED

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        if not isinstance(message, str) or not isinstance(code, ErrorCode):
            raise TypeError(f"TritonError(message: str, code: TritonError code): {message!r}")
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> ErrorCode:
        return self._code


class Tensor:
    """``Tensor(name, numpy_array)`` as ``PbTensor``'s numpy constructor builds it."""

    def __init__(self, name: str, array: Any) -> None:
        if name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        array = np.asarray(array)
        utils = sys.modules[MODULE]
        self.triton_dtype = utils.numpy_to_triton_type(array.dtype)
        if self.triton_dtype is None:
            raise TritonModelException(f"unsupported numpy dtype {array.dtype}")
        self._name = name
        self._array = array if array.flags.c_contiguous else np.ascontiguousarray(array)
        self._dims = list(self._array.shape)
        is_bytes = self.triton_dtype == utils.numpy_to_triton_type(np.object_)
        self._wire = utils.serialize_byte_tensor(self._array) if is_bytes else None

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return self._dims

    def is_cpu(self) -> bool:
        return True  # the stand-in's arrays are host memory


# ``TRITONSERVER_memorytype_enum`` (tritonserver.h), as the stub exports it.
TRITONSERVER_MEMORY_CPU, TRITONSERVER_MEMORY_CPU_PINNED, TRITONSERVER_MEMORY_GPU = 0, 1, 2


class PreferredMemory:
    """``PreferredMemory(memory_type, device_id)``: where a BLS call wants its outputs."""

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


def received(tensor: Tensor) -> np.ndarray:
    """The array the other process reads: BYTES deserialised to an object array of ``bytes``
    (``PbTensor``'s shared-memory constructor), other dtypes copied out."""
    if tensor._wire is None:
        return tensor.as_numpy().copy()
    utils = sys.modules[MODULE]
    return utils.deserialize_bytes_tensor(tensor._wire).reshape(tensor.shape())


class InferenceResponse:
    def __init__(
        self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None
    ) -> None:
        self._outputs = list(output_tensors or [])
        self._error = error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


@dataclass
class ResponseSender:
    """``InferenceResponseSender``: records what the model sent, and with which flags."""

    sent: list[tuple[InferenceResponse | None, int]] = field(default_factory=list)

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if (
            self.sent
            and self.sent[-1][1] & sys.modules[MODULE].TRITONSERVER_RESPONSE_COMPLETE_FINAL
        ):
            raise TritonModelException("Unable to send response. Response sender has been closed.")
        self.sent.append((response, flags))

    def is_cancelled(self) -> bool:
        return False


BlsHandler = Callable[[str, dict[str, np.ndarray], list[str]], InferenceResponse]


class InferenceRequest:
    """A request as ``execute`` receives it (:func:`request`) or as a BLS call builds it."""

    def __init__(
        self,
        *,
        inputs: list[Tensor],
        requested_output_names: list[str],
        model_name: str,
        request_id: str = "",
        model_version: int = -1,
        preferred_memory: PreferredMemory | None = None,
    ) -> None:
        for value in (inputs, requested_output_names, model_name):
            if value is None:
                raise TypeError("InferenceRequest: inputs, outputs and model_name may not be None")
        self._inputs = list(inputs)
        self.requested_output_names = list(requested_output_names)
        self.model_name = model_name
        self.preferred_memory = preferred_memory
        self.sender = ResponseSender()

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def get_response_sender(self) -> ResponseSender:
        return self.sender

    def exec(self, decoupled: bool = False) -> InferenceResponse:
        """A BLS call: the handler installed by :func:`install` plays the called model, fed the
        inputs as that model would read them."""
        handler: BlsHandler | None = getattr(sys.modules[MODULE], "bls_handler", None)
        if handler is None:
            raise TritonModelException(f"no model '{self.model_name}' (no BLS handler installed)")
        feeds = {tensor.name(): received(tensor) for tensor in self._inputs}
        return handler(self.model_name, feeds, self.requested_output_names)


def build() -> ModuleType:
    """The real pure-Python file, with the stand-ins of the stub's C++ classes added."""
    spec = importlib.util.spec_from_file_location(MODULE, real_utils_file())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for cls in (
        Tensor, TritonError, InferenceRequest, InferenceResponse, TritonModelException,
        PreferredMemory,
    ):  # fmt: skip
        setattr(module, cls.__name__, cls)
    module.TRITONSERVER_MEMORY_CPU = TRITONSERVER_MEMORY_CPU
    module.TRITONSERVER_MEMORY_CPU_PINNED = TRITONSERVER_MEMORY_CPU_PINNED
    module.TRITONSERVER_MEMORY_GPU = TRITONSERVER_MEMORY_GPU
    module.InferenceResponseSender = ResponseSender
    module.bls_handler = None
    return module


def install(monkeypatch: pytest.MonkeyPatch, *modules: str) -> ModuleType:
    """Put a fresh stand-in in ``sys.modules`` and point each named module's ``pb_utils`` at it
    (they bound ``pb_utils = None`` when imported outside the stub). The monkeypatch undoes
    both at the end of the test."""
    utils = build()
    monkeypatch.setitem(sys.modules, MODULE, utils)
    for name in modules:
        monkeypatch.setattr(importlib.import_module(name), "pb_utils", utils)
    return utils


def request(inputs: dict[str, np.ndarray]) -> InferenceRequest:
    """A request as the stub hands it to ``execute``: every input read back from the wire."""
    tensors = []
    for name, value in inputs.items():
        sent = Tensor(name, value)
        tensors.append(Tensor(name, received(sent)))
    return InferenceRequest(inputs=tensors, requested_output_names=[], model_name="")


def outputs(response: InferenceResponse) -> dict[str, np.ndarray]:
    """A successful response's outputs as the client reads them."""
    assert not response.has_error(), response.error().message()
    return {tensor.name(): received(tensor) for tensor in response.output_tensors()}


def error_of(response: InferenceResponse) -> tuple[ErrorCode, str]:
    """A failed response's (code, message)."""
    assert response.has_error(), "expected an error response"
    error = response.error()
    return error.code(), error.message()
