"""One BLS call (``pb_utils.InferenceRequest``) from a python model to another model."""

from __future__ import annotations

import numpy as np

from triton_kit.python_models.common.base import Arrays

try:  # Present only inside Triton's python stub.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover
    pb_utils = None


def infer(model: str, inputs: Arrays, outputs: list[str]) -> list[np.ndarray]:
    """Run ``model`` on ``inputs``; the named outputs, in order, as host arrays. Errors raise
    RuntimeError.

    The outputs are asked for in CPU memory: a model on a GPU (Triton's pytorch backend with
    ``KIND_GPU``) otherwise answers with device tensors, which ``as_numpy`` refuses ("Tensor
    is stored in GPU", seen on the H100). Where the backend ignores the preference, DLPack
    brings them over.
    """
    request = pb_utils.InferenceRequest(
        model_name=model,
        requested_output_names=outputs,
        inputs=[pb_utils.Tensor(name, np.ascontiguousarray(v)) for name, v in inputs.items()],
        preferred_memory=pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0),
    )
    response = request.exec()
    if response.has_error():
        raise RuntimeError(f"{model}: {response.error().message()}")
    return [_host(pb_utils.get_output_tensor_by_name(response, name)) for name in outputs]


def _host(tensor) -> np.ndarray:
    if tensor.is_cpu():
        return tensor.as_numpy()
    from torch.utils.dlpack import from_dlpack

    return from_dlpack(tensor.to_dlpack()).cpu().numpy()
