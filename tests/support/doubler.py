"""A python model that doubles its FP32 [4] input: the smallest model a real Triton serves,
for tests of the server around it (metrics, launcher flags)."""

from __future__ import annotations

from pathlib import Path

DOUBLER_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)]
            )
            for r in requests
        ]
"""


def doubler_config(name: str) -> str:
    return f"""
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
dynamic_batching {{ }}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def write_doubler(repository: Path, name: str) -> None:
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(doubler_config(name))
    (repository / name / "1" / "model.py").write_text(DOUBLER_MODEL)
