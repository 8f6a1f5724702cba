"""One BLS call (``pb_utils.InferenceRequest``) from a python model to another model."""

from __future__ import annotations

import numpy as np

from python_models.common.base import Arrays

try:  # Present only inside Triton's python stub.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover
    pb_utils = None


def infer(model: str, inputs: Arrays, outputs: list[str]) -> list[np.ndarray]:
    """Run ``model`` on ``inputs``; the named outputs, in order. Errors raise RuntimeError."""
    request = pb_utils.InferenceRequest(
        model_name=model,
        requested_output_names=outputs,
        inputs=[pb_utils.Tensor(name, np.ascontiguousarray(v)) for name, v in inputs.items()],
    )
    response = request.exec()
    if response.has_error():
        raise RuntimeError(f"{model}: {response.error().message()}")
    return [pb_utils.get_output_tensor_by_name(response, name).as_numpy() for name in outputs]
