"""``triton_kit.python_models.common.bls.infer`` through tests/support/pb_utils_standin.py: the
request it builds (model, inputs as the called model reads them, requested outputs) and what
it returns or raises."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import pb_utils_standin as standin
from triton_kit.python_models.common import bls


@pytest.fixture
def pb_utils(monkeypatch):
    return standin.install(monkeypatch, "triton_kit.python_models.common.bls")


def test_infer_sends_the_inputs_and_returns_the_outputs_in_the_asked_order(pb_utils) -> None:
    seen = []

    def called(model, feeds, names):
        seen.append((model, {k: (v.dtype, v.tolist()) for k, v in feeds.items()}, names))
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor("B", np.array([1, 2], dtype=np.int32)),
                pb_utils.Tensor("A", np.array([[0.5]], dtype=np.float32)),
            ]
        )

    pb_utils.bls_handler = called
    strided = np.arange(6, dtype=np.int64).reshape(2, 3)[:, ::2]
    a, b = bls.infer("m", {"x": strided, "t": np.array([b"hi"], dtype=object)}, ["A", "B"])
    assert a.tolist() == [[0.5]] and a.dtype == np.float32
    assert b.tolist() == [1, 2] and b.dtype == np.int32
    assert seen == [
        (
            "m",
            {"x": (np.dtype(np.int64), [[0, 2], [3, 5]]), "t": (np.dtype(object), [b"hi"])},
            ["A", "B"],
        )
    ]


def test_infer_raises_the_called_model_s_error(pb_utils) -> None:
    def failing(model, feeds, names):
        error = pb_utils.TritonError("in use", pb_utils.TritonError.UNAVAILABLE)
        return pb_utils.InferenceResponse(error=error)

    pb_utils.bls_handler = failing
    with pytest.raises(RuntimeError) as info:
        bls.infer("enc", {"x": np.zeros(1)}, ["y"])
    assert str(info.value) == "enc: in use"


def test_the_stand_in_refuses_what_the_stub_refuses(pb_utils) -> None:
    """The stand-in's own checks, each as the stub's C++ makes it (pb_tensor.cc, pb_stub.cc)."""
    with pytest.raises(pb_utils.TritonModelException, match="Tensor name cannot be an empty"):
        pb_utils.Tensor("", np.zeros(1))
    with pytest.raises(TypeError):
        pb_utils.TritonError(None)
    assert pb_utils.TritonError("m").code() == pb_utils.TritonError.INTERNAL == 1
    assert pb_utils.TritonError.INVALID_ARG == 3
    text = pb_utils.Tensor("T", np.array([["é"], [b"b"]], dtype=object))
    assert standin.received(text).tolist() == [["é".encode()], [b"b"]]
    with pytest.raises(standin.TritonModelException):
        pb_utils.InferenceRequest(inputs=[], requested_output_names=[], model_name="x").exec()


def test_infer_asks_for_the_outputs_in_cpu_memory(pb_utils, monkeypatch) -> None:
    """A model on a GPU (the pytorch backend, KIND_GPU) answered a BLS call with device tensors
    on the H100, which ``as_numpy`` refuses ("Tensor is stored in GPU"): the call asks for
    host memory."""
    asked = []
    build = pb_utils.InferenceRequest

    def recording(**kwargs):
        asked.append(kwargs.get("preferred_memory"))
        return build(**kwargs)

    monkeypatch.setattr(pb_utils, "InferenceRequest", recording)
    pb_utils.bls_handler = lambda model, feeds, names: pb_utils.InferenceResponse(
        output_tensors=[pb_utils.Tensor("y", np.zeros(1, dtype=np.int64))]
    )
    bls.infer("m", {"x": np.zeros(1, dtype=np.int64)}, ["y"])
    (preferred,) = asked
    assert preferred.preferred_memory_type == pb_utils.TRITONSERVER_MEMORY_CPU
