"""The pytorch_libtorch config.pbtxt: device, dynamic batching and CUDA graph buckets."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2 as mc

from build_engines.repository import (
    Tensor,
    add_inputs,
    add_outputs,
    enable_dynamic_batching,
    set_instances,
    set_parameters,
)


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


def torch_model_config(
    name: str, inputs: Iterable[Tensor], outputs: Iterable[Tensor], options: TorchConfigOptions
) -> mc.ModelConfig:
    config = mc.ModelConfig(
        name=name, platform="pytorch_libtorch", max_batch_size=options.max_batch_size
    )
    config.default_model_filename = "model.pt"
    add_inputs(config, inputs)
    add_outputs(config, outputs)
    set_instances(config, options.instances, "KIND_GPU" if options.gpu else "KIND_CPU")
    set_parameters(config, {"precision": options.precision})
    if options.queue_delay_us is not None:
        enable_dynamic_batching(config, options.queue_delay_us)
    if options.gpu and options.graph_batch_sizes:
        config.optimization.cuda.graphs = True
        for batch in options.graph_batch_sizes:
            spec = config.optimization.cuda.graph_spec.add(batch_size=batch)
            for input_name, dims in options.graph_dims.items():
                spec.input[input_name].dim.extend(dims)
    return config
