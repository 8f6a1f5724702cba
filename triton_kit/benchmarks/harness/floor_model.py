"""A served model that does no work: what any request to this Triton costs by itself.

``bert`` short texts are served at 0.5-0.8x in-process (benchmarks/results/bert.md). To say how
much of that is the serving path rather than the model, the BERT benchmark serves this "floor"
beside ``bert``, with the same interface and scheduling (TEXT in, a zero EMBEDDING of the
same width out, dynamic batching with no queue delay, one instance) and the same client, so
Triton / in-process can be compared with in-process / (in-process + floor).
"""

from __future__ import annotations

from pathlib import Path

FLOOR_MODEL = '''"""The serving floor: a zero embedding per text, read like bert reads its input."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.width = int(config["output"][0]["dims"][0])

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            vector = np.zeros((text.shape[0], self.width), dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("EMBEDDING", vector)]))
        return responses
'''


def floor_config(name: str, width: int, max_batch_size: int) -> str:
    return f"""name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input {{ name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] }}
output {{ name: "EMBEDDING" data_type: TYPE_FP32 dims: [ {width} ] }}
instance_group {{ count: 1 kind: KIND_CPU }}
dynamic_batching {{ }}
"""


def write_floor_model(repo: Path, name: str, width: int, max_batch_size: int) -> str:
    """``repo/name``: the floor model answering like an embedding model of ``width``."""
    version = repo / name / "1"
    version.mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(floor_config(name, width, max_batch_size))
    (version / "model.py").write_text(FLOOR_MODEL)
    return name
