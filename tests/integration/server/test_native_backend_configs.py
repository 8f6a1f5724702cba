"""Every config the build writes is one Triton's own onnxruntime backend accepts.

The native backend compares each output's configured shape with the ONNX file's exactly
(``CompareDimsSupported(..., compare_exact=true)`` in onnxruntime_backend r24.10) as ONNX
Runtime's session reports it (the file's shapes after ONNX Runtime's own inference): a
dim it cannot resolve must be -1 in the config, a fixed one the same number. The 24.10
container refuses a model that breaks this, so the check runs here without a server.
"""

from __future__ import annotations

from pathlib import Path

import onnxruntime
import pytest

from tests.support.prerequisites import MODEL_REPOSITORY
from triton_kit.server.model_backends import model_backends, read_config

ONNX_TYPES = {"onnxruntime"}


def _onnx_models() -> list[str]:
    return [m for m, b in model_backends(MODEL_REPOSITORY).items() if b in ONNX_TYPES]


def _session_shape(shape: list[int | str | None]) -> list[int]:
    return [dim if isinstance(dim, int) else -1 for dim in shape]


def shape_problems(model_dir: Path) -> list[str]:
    config = read_config(model_dir / "config.pbtxt")
    filename = config.default_model_filename or "model.onnx"
    session = onnxruntime.InferenceSession(
        str(model_dir / "1" / filename), providers=["CPUExecutionProvider"]
    )
    in_file = {o.name: _session_shape(o.shape) for o in session.get_outputs()}
    batch = [-1] if config.max_batch_size > 0 else []
    problems = []
    for output in config.output:
        expected = in_file.get(output.name)
        configured = batch + list(output.dims)
        if expected is None:
            problems.append(f"{output.name}: not an output of {filename}")
        elif expected != configured:
            problems.append(f"{output.name}: file {expected}, config {configured}")
    return problems


@pytest.mark.parametrize("model", _onnx_models())
def test_output_shapes_match_the_onnx_file_exactly(model: str) -> None:
    assert shape_problems(MODEL_REPOSITORY / model) == []
