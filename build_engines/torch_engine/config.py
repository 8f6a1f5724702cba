"""A TorchScript model's config.pbtxt and files: device, dynamic batching, CUDA graph buckets.

Without graph buckets the model is ``platform: "pytorch_libtorch"``, served by Triton's own
pytorch backend. With them (GPU only) it is a python model running
``python_models.common.torchscript.TorchScriptModel``, since the native backend has no
CUDA graphs; the container's python backend runs it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from build_engines.repository import (
    Tensor,
    add_inputs,
    add_outputs,
    enable_dynamic_batching,
    python_shim,
    set_instances,
    set_parameters,
)

CUDA_GRAPH_MODEL = "python_models.common.torchscript.TorchScriptModel"
# Triton's pytorch backend runs TorchScript under the JIT's profiling executor by default,
# which re-specialises the graph for every new input shape: with dynamic batching every
# batch size is a new shape, and on the H200 one-image ResNet-50 requests at concurrency 64
# were served at 23 img/s (p50 4.3 s) while it recompiled. Off, it runs as eager TorchScript.
NATIVE_PARAMETERS = {"DISABLE_OPTIMIZED_EXECUTION": "true"}


@dataclass(frozen=True)
class TorchConfigOptions:
    """How the TorchScript model is served (defaults: one CPU instance, no graphs)."""

    max_batch_size: int
    gpu: bool = False
    instances: int = 1
    precision: str = "fp32"
    queue_delay_us: int | None = None
    graph_batch_sizes: tuple[int, ...] = ()  # CUDA graph per batch bucket (GPU only)
    graph_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)  # fixed inner dims

    @property
    def cuda_graphs(self) -> bool:
        return self.gpu and bool(self.graph_batch_sizes)


def torch_model_config(
    name: str, inputs: Iterable[Tensor], outputs: Iterable[Tensor], options: TorchConfigOptions
) -> mc.ModelConfig:
    config = mc.ModelConfig(name=name, max_batch_size=options.max_batch_size)
    if options.cuda_graphs:
        config.backend = "python"  # its model.py is the one torch_model_files writes
    else:
        config.platform = "pytorch_libtorch"
        config.default_model_filename = "model.pt"
    add_inputs(config, inputs)
    add_outputs(config, outputs)
    set_instances(config, options.instances, "KIND_GPU" if options.gpu else "KIND_CPU")
    native = {} if options.cuda_graphs else NATIVE_PARAMETERS
    set_parameters(config, {"precision": options.precision, **native})
    if options.queue_delay_us is not None:
        enable_dynamic_batching(config, options.queue_delay_us)
    if options.cuda_graphs:
        config.optimization.cuda.graphs = True
        for batch in options.graph_batch_sizes:
            spec = config.optimization.cuda.graph_spec.add(batch_size=batch)
            for input_name, dims in options.graph_dims.items():
                spec.input[input_name].dim.extend(dims)
    return config


def torch_model_files(model_pt: Path, options: TorchConfigOptions) -> dict[str, Path | str]:
    """The version folder's files: the TorchScript, and the python model that runs its
    graphs where the config asks for them."""
    files: dict[str, Path | str] = {"model.pt": model_pt}
    if options.cuda_graphs:
        files["model.py"] = python_shim(CUDA_GRAPH_MODEL)
    return files
