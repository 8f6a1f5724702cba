"""The smallest model a real Triton serves, and the one writer of a python model into a
repository: stand-ins for measuring (or testing) the server around a model rather than the
model (the launcher row's ``--tiny``; tests of metrics and launch flags).

The doubler: FP32 ``X`` [width] in, ``Y = 2 X`` out, through the python backend with
dynamic batching and one CPU instance.
"""

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


def doubler_config(
    name: str, *, width: int = 4, max_batch_size: int = 8, queue_delay_us: int | None = None
) -> str:
    """The doubler's config.pbtxt; ``queue_delay_us`` None leaves Triton's default (0)."""
    delay = "" if queue_delay_us is None else f"max_queue_delay_microseconds: {queue_delay_us} "
    return f"""
name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {width} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ {width} ] }} ]
dynamic_batching {{ {delay}}}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def write_python_model(repository: Path, name: str, model: str, config: str) -> Path:
    """``repository/name/config.pbtxt`` and ``repository/name/1/model.py``; the model folder."""
    folder = repository / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(config)
    (folder / "1" / "model.py").write_text(model)
    return folder


def write_doubler(repository: Path, name: str, **config: int | None) -> Path:
    """The doubler as ``name`` in ``repository`` (``config``: doubler_config's keywords)."""
    return write_python_model(repository, name, DOUBLER_MODEL, doubler_config(name, **config))
