"""TorchScript with CUDA graphs per batch bucket, as a python-backend model.

Triton's own pytorch backend serves ``platform: "pytorch_libtorch"`` models, eagerly: it
has no CUDA graphs, and batch-1 models are launch-bound on the H100 without them
(ResNet-50 3.18 ms served natively against 2.51 ms here with graphs). So a model whose
build asks for graph buckets is written as a python model (``backend: "python"``, a
one-line ``model.py`` importing this class, the TorchScript beside it as ``model.pt``);
it runs the same in the container's python backend. The instance group decides the device
(``KIND_GPU``: the GPU Triton assigns to the instance; otherwise CPU, eagerly).

On the GPU it honours Triton's own ``optimization { cuda { graphs: true graph_spec
{...} } }``: one CUDA graph per ``graph_spec`` (batch size and input shapes); a batch
is padded up to the smallest captured graph that holds it, and runs eagerly where none
does. Three traps measured on the H100 are avoided: inputs are read with ``as_numpy()``
(DLPack views of Triton's shared memory cost ~8 ms a request), copied once into a
pinned buffer, and ``cudnn.benchmark`` stays off (it re-tunes for every batch size).
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import torch

from triton_kit.python_models.common.base import Arrays, InvalidInput, PythonModel
from triton_kit.python_models.common.cuda_graphs import (
    CudaGraph,
    graph_key,
    graph_shapes,
    graphs_enabled,
    pick,
)


class TorchScriptModel(PythonModel):
    def initialize(self, args: dict[str, str]) -> None:
        gpu = args.get("model_instance_kind", "CPU") == "GPU" and torch.cuda.is_available()
        self.device = torch.device(
            f"cuda:{args.get('model_instance_device_id', 0)}" if gpu else "cpu"
        )
        super().initialize(args)

    def setup(self) -> None:
        torch.backends.cudnn.benchmark = False
        path = self.version_dir / self.module_filename()
        if not path.exists():
            raise FileNotFoundError(
                f"{path} not found; build it with `python -m triton_kit.build_engines`"
            )
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.set_num_threads(1)  # only host copies run on the CPU; instances share cores
        self.module = self.load_module(path)
        self.output_names = list(self.output_dtypes)
        self.input_dtypes = {
            spec["name"]: _TORCH_DTYPES[spec["data_type"]] for spec in self.model_config["input"]
        }
        self.graphs: dict[tuple, CudaGraph] = {}
        if self.device.type == "cuda" and graphs_enabled(self.model_config):
            for shapes in graph_shapes(self.model_config):
                self.graphs[graph_key(shapes)] = CudaGraph(self._forward, shapes, self.input_dtypes)

    def module_filename(self) -> str:
        return torchscript_filename(self.model_config)

    def load_module(self, path):
        """The callable the graphs capture (subclasses load other formats)."""
        return torch.jit.load(str(path), map_location=self.device).eval()

    def _forward(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        result = self.module(*(inputs[name] for name in self.input_names))
        return result if isinstance(result, tuple) else (result,)

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        """Requests of equal non-batch shapes run together; results split back per request.
        Unbatched (``max_batch_size: 0``): each request alone, dimension 0 is not a batch."""
        groups: dict[tuple, list[int]] = defaultdict(list)
        for index, inputs in enumerate(batch):
            if self.max_batch_size == 0:
                groups[(index,)].append(index)
                continue
            groups[tuple((name, inputs[name].shape[1:]) for name in sorted(inputs))].append(index)
        results: list[Arrays | Exception] = [InvalidInput("not run")] * len(batch)
        for indices in groups.values():
            try:
                group_results = self._run([batch[i] for i in indices])
            except Exception as exc:
                group_results = [self._note(exc)] * len(indices)
            for index, result in zip(indices, group_results, strict=True):
                results[index] = result
        return results

    @torch.inference_mode()
    def _run(self, group: list[Arrays]) -> list[Arrays]:
        start = time.perf_counter()
        stacked = {name: np.concatenate([g[name] for g in group]) for name in self.input_names}
        rows = next(iter(stacked.values())).shape[0]
        start = self.timed("stack", start)
        graph = self._graph_for(stacked, rows)
        if graph is not None:
            values = graph.run(stacked, rows)
        else:
            tensors = {
                n: _to_device(a, self.input_dtypes[n], self.device) for n, a in stacked.items()
            }
            values = [v.float().cpu().numpy() for v in self._forward(tensors)]
        start = self.timed("graph" if graph is not None else "eager", start)
        bounds = np.cumsum([g[self.input_names[0]].shape[0] for g in group])[:-1]
        split = [np.split(value, bounds) for value in values]
        return [
            {name: parts[i] for name, parts in zip(self.output_names, split, strict=True)}
            for i in range(len(group))
        ]

    def _graph_for(self, stacked: Arrays, rows: int) -> CudaGraph | None:
        """The smallest captured graph with these non-batch shapes and at least ``rows`` rows."""
        shapes = {name: array.shape[1:] for name, array in stacked.items()}
        return pick(self.graphs.values(), shapes, rows)


def torchscript_filename(model_config: dict) -> str:
    """``model.pt``, unless the config names another TorchScript: as a python model, its
    ``default_model_filename`` is filled in by Triton with the ``model.py`` it runs."""
    named = model_config.get("default_model_filename") or ""
    return named if named and not named.endswith(".py") else "model.pt"


def _to_device(array: np.ndarray, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    tensor = torch.from_numpy(np.ascontiguousarray(array)).to(dtype)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor


_TORCH_DTYPES = {
    "TYPE_FP32": torch.float32,
    "TYPE_FP16": torch.float16,
    "TYPE_INT64": torch.int64,
    "TYPE_INT32": torch.int32,
    "TYPE_UINT8": torch.uint8,
    "TYPE_INT8": torch.int8,
    "TYPE_BOOL": torch.bool,
}
