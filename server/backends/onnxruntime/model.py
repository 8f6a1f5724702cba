"""A Python-based ``onnxruntime`` backend for the embedded Triton server.

The nvidia-pytriton wheel ships only the python backend. Triton loads any
``<backend-dir>/<name>/model.py`` as a backend called ``<name>``, so this file
serves every model whose config says ``platform: "onnxruntime_onnx"`` or
``backend: "onnxruntime"``. The official container has the native C++ backend
of the same name and never sees this file, so one config.pbtxt serves both.

Honoured from config.pbtxt: ``max_batch_size``, input/output names and dtypes,
``default_model_filename``, ``instance_group`` (Triton starts one stub, so one
session, per instance) and the native backend's parameters
``intra_op_thread_count``, ``inter_op_thread_count`` and ``execution_mode``, plus any
ONNX Runtime session config entry given by its own ``session.*`` key.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from python_models.common.base import Arrays, InvalidInput, PythonModel
from python_models.common.ort_session import SessionSettings, create_session


class TritonPythonModel(PythonModel):
    def setup(self) -> None:
        filename = self.model_config.get("default_model_filename") or "model.onnx"
        path = self.version_dir / filename
        if not path.exists():
            raise FileNotFoundError(f"{path} not found; build it with `python -m build_engines`")
        # Threads, execution mode and any ``session.*`` config entry, read from the config
        # parameters the way the native backend reads them (python_models.common.ort_session).
        self.session = create_session(path, SessionSettings.from_parameters(self.params.as_dict()))
        self.onnx_input_dtypes = {
            node.name: _ORT_TO_NUMPY.get(node.type, np.float32)
            for node in self.session.get_inputs()
        }
        missing = set(self.input_names) - set(self.onnx_input_dtypes)
        if missing:
            raise ValueError(f"config inputs {sorted(missing)} are not inputs of {filename}")
        self.output_names = list(self.output_dtypes)

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        """Run requests of equal non-batch shape as one session call; split the results."""
        if self.max_batch_size == 0:
            return [self._run_isolated([inputs])[0] for inputs in batch]
        groups: dict[tuple, list[int]] = defaultdict(list)
        for index, inputs in enumerate(batch):
            groups[tuple((name, inputs[name].shape[1:]) for name in sorted(inputs))].append(index)
        results: list[Arrays | Exception] = [InvalidInput("not run")] * len(batch)
        for indices in groups.values():
            group_results = self._run_isolated([batch[i] for i in indices])
            for index, result in zip(indices, group_results, strict=True):
                results[index] = result
        return results

    def _run_isolated(self, group: list[Arrays]) -> list[Arrays | Exception]:
        try:
            return self._run(group)
        except Exception as exc:
            return [self._note(exc)] * len(group)

    def _run(self, group: list[Arrays]) -> list[Arrays]:
        feed = {
            name: _stack([inputs[name] for inputs in group], self.max_batch_size).astype(
                self.onnx_input_dtypes[name], copy=False
            )
            for name in group[0]
        }
        values = self.session.run(self.output_names, feed)
        outputs = dict(zip(self.output_names, values, strict=True))
        if self.max_batch_size == 0:
            return [outputs]
        sizes = [next(iter(inputs.values())).shape[0] for inputs in group]
        bounds = np.cumsum(sizes)[:-1]
        split = {name: np.split(value, bounds) for name, value in outputs.items()}
        return [{name: parts[i] for name, parts in split.items()} for i in range(len(group))]


def _stack(arrays: list[np.ndarray], max_batch_size: int) -> np.ndarray:
    if max_batch_size == 0 or len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays, axis=0)


_ORT_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
