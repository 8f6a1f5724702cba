"""A TorchScript model's config.pbtxt and files: device, dynamic batching, CUDA graph buckets.

Without graph buckets the model is ``platform: "pytorch_libtorch"``, served by Triton's own
pytorch backend. With them (GPU only) it is a python model running
``triton_kit.python_models.common.torchscript.TorchScriptModel``, since the native backend has no
CUDA graphs; the container's python backend runs it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.repository import (
    Tensor,
    add_inputs,
    add_outputs,
    enable_dynamic_batching,
    python_shim,
    set_instances,
    set_parameters,
)

CUDA_GRAPH_MODEL = "triton_kit.python_models.common.torchscript.TorchScriptModel"
# Triton's pytorch backend runs TorchScript under the JIT's profiling executor by default,
# which re-specialises the graph for every new input shape: with dynamic batching every
# batch size is a new shape, and on the H200 one-image ResNet-50 requests at concurrency 64
# were served at 23 img/s (p50 4.3 s) while it recompiled. Off, it runs as eager TorchScript.
NATIVE_PARAMETERS = {"DISABLE_OPTIMIZED_EXECUTION": "true"}


def optimized_execution(config: mc.ModelConfig) -> bool:
    """Whether Triton's pytorch backend runs this config's TorchScript under the JIT's
    profiling executor (what ``torch.jit.optimized_execution`` must be set to in process)."""
    parameter = config.parameters.get("DISABLE_OPTIMIZED_EXECUTION")
    return parameter is None or parameter.string_value != "true"


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
    config.platform = "pytorch_libtorch"
    config.default_model_filename = "model.pt"
    add_inputs(config, inputs)
    add_outputs(config, outputs)
    set_instances(config, options.instances, "KIND_GPU" if options.gpu else "KIND_CPU")
    set_parameters(config, {"precision": options.precision, **NATIVE_PARAMETERS})
    if options.queue_delay_us is not None:
        enable_dynamic_batching(config, options.queue_delay_us)
    if options.cuda_graphs:
        use_cuda_graphs(config, options.graph_batch_sizes, options.graph_dims)
    return config


def use_cuda_graphs(
    config: mc.ModelConfig, batch_sizes: Iterable[int], dims: dict[str, tuple[int, ...]]
) -> None:
    """Turn a native TorchScript config into the CUDA-graph python model: one graph per
    batch size with these inner input dims (its model.py is what torch_model_files writes)."""
    config.ClearField("platform")
    config.ClearField("default_model_filename")  # the python backend fills in its model.py
    config.backend = "python"
    for key in NATIVE_PARAMETERS:
        config.parameters.pop(key, None)
    config.optimization.cuda.graphs = True
    for batch in batch_sizes:
        spec = config.optimization.cuda.graph_spec.add(batch_size=batch)
        for input_name, inner in dims.items():
            spec.input[input_name].dim.extend(inner)


def fixed_input_dims(config: mc.ModelConfig) -> dict[str, tuple[int, ...]] | None:
    """Each input's inner dims, or None where one is open (-1): a graph needs fixed shapes."""
    dims = {tensor.name: tuple(tensor.dims) for tensor in config.input}
    return None if any(d < 0 for inner in dims.values() for d in inner) else dims


def batch_buckets(max_batch_size: int) -> tuple[int, ...]:
    """Powers of two up to the model's largest batch, and that batch itself."""
    sizes = [1 << i for i in range(max_batch_size.bit_length()) if 1 << i < max_batch_size]
    return (*sizes, max_batch_size) if max_batch_size > 0 else ()


def torch_model_files(model_pt: Path, options: TorchConfigOptions) -> dict[str, Path | str]:
    """The version folder's files: the TorchScript, and the python model that runs its
    graphs where the config asks for them."""
    return torchscript_files(model_pt, options.cuda_graphs)


def torchscript_files(model_pt: Path, cuda_graphs: bool) -> dict[str, Path | str]:
    files: dict[str, Path | str] = {"model.pt": model_pt}
    if cuda_graphs:
        files["model.py"] = python_shim(CUDA_GRAPH_MODEL)
    return files


@dataclass(frozen=True)
class GpuBatching:
    """How a native TorchScript model batches on the GPU: instances, queue delay, preferred."""

    instances: int
    queue_delay_us: int
    preferred: tuple[int, ...]


def apply_gpu_batching(config: mc.ModelConfig, batching: GpuBatching) -> None:
    """Instances on the GPU and the batcher's delay and preferred sizes (those the model's
    max_batch_size allows); a queue policy already written stays."""
    set_instances(config, batching.instances, "KIND_GPU")
    config.dynamic_batching.max_queue_delay_microseconds = batching.queue_delay_us
    del config.dynamic_batching.preferred_batch_size[:]
    config.dynamic_batching.preferred_batch_size.extend(
        size for size in batching.preferred if size <= config.max_batch_size
    )
