"""The config.pbtxt of a model served by ``pytorch_aoti``.

The pytorch backend's PT2 path takes tensors by position, named ``INPUT__n``/``OUTPUT__n``;
the family's names (what its ensembles and clients use) are kept in the ``tensor_names``
parameter, in order, and an ensemble maps to the served config's names.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

AOTI_BACKEND = "pytorch_aoti"  # triton_kit.server.native_backends.aoti.AOTI_BACKEND
AOTI_PLATFORM = "torch_aoti"
PACKAGE_FILE = "model.pt2"
_ONNX_RUNTIME_ONLY = ("intra_op_thread_count", "inter_op_thread_count")
GRAPH_PADDING = 8  # up to FINE_GRAPHS_UP_TO rows, a graph's batch is at most 1/8 padding
FINE_GRAPHS_UP_TO = 64


def graph_batch_sizes(max_batch_size: int, fine_up_to: int = FINE_GRAPHS_UP_TO) -> tuple[int, ...]:
    """The batch sizes to capture a CUDA graph at. A batch runs in the smallest graph that holds
    it, so up to ``fine_up_to`` rows the sizes are at most an eighth apart (every size up to 16,
    then 18, .., 32, 36, .., 64): with powers of two, the 11-row batches four BERT-base instances
    ran at c64 (call 37) were 16-row graphs. Above, powers of two: ResNet-50's 48 sizes up to 256
    ran four instances out of the H100's memory while each capture took a stream of its own
    (session 41); on one stream per instance 34 sizes loaded (session 42), and 48 sizes on 3
    instances (session 43, ``benchmarks.gpu.aoti --fine-graphs-up-to 256``), which served 0.84x
    against 0.82x for 4 plain instances in one load: too little to change the default."""
    sizes, size = [], 1
    while size < min(max_batch_size, fine_up_to):
        sizes.append(size)
        size += max(1, (1 << (size.bit_length() - 1)) // GRAPH_PADDING)
    while size < max_batch_size:
        sizes.append(size)
        size *= 2
    return (*sizes, max_batch_size) if max_batch_size > 0 else ()


def aoti_config(
    onnx_config: mc.ModelConfig, *, gpu: bool, precision: str, cuda_graphs: bool = False
) -> mc.ModelConfig:
    """The ONNX model's config (batching, instances, queue) served from ``model.pt2``;
    ``cuda_graphs`` on a GPU build: Triton's ``optimization.cuda.graphs``, which the kit's
    pytorch_aoti build reads (a graph per batch size, scripts/gpu/pytorch_aoti/cuda_graphs.hh),
    with the sizes in ``graph_spec`` and a warm-up request at each."""
    config = mc.ModelConfig()
    config.CopyFrom(onnx_config)
    config.ClearField("platform")
    config.backend = AOTI_BACKEND
    config.platform = AOTI_PLATFORM
    config.default_model_filename = PACKAGE_FILE
    names = []
    for prefix, tensors in (("INPUT", config.input), ("OUTPUT", config.output)):
        for index, tensor in enumerate(tensors):
            names.append(f"{prefix}__{index}={tensor.name}")
            tensor.name = f"{prefix}__{index}"
    for key in _ONNX_RUNTIME_ONLY:
        config.parameters.pop(key, None)
    config.parameters["precision"].string_value = precision
    config.parameters["tensor_names"].string_value = ";".join(names)
    kind = mc.ModelInstanceGroup.KIND_GPU if gpu else mc.ModelInstanceGroup.KIND_CPU
    for group in config.instance_group:
        group.kind = kind
    if cuda_graphs and gpu:
        _capture_at_load(config)
    return config


def capture_order(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Largest first. An instance's graphs share one memory pool (captured on one stream,
    scripts/gpu/pytorch_aoti/cuda_graphs.hh), and a smaller graph's buffers fit in the blocks a
    larger one freed, not the other way round: a small CNN's 48 graphs reserved 3.5 GiB largest
    first against 13.1 GiB smallest first (gpu/issue30-goals/session41/graph_pool.json)."""
    return tuple(sorted(sizes, reverse=True))


def _capture_at_load(config: mc.ModelConfig) -> None:
    """A graph per :func:`graph_batch_sizes` size, each captured at load by a zero-filled
    warm-up request of that size, so no first user pays a capture (about 90 ms each on the
    H100, one at a time: benchmarks/results/gpu_aoti/call38-resnet50-graphs.md)."""
    config.optimization.cuda.graphs = True
    sizes = graph_batch_sizes(config.max_batch_size)
    for size in sizes:
        config.optimization.cuda.graph_spec.add(batch_size=size)
    for size in capture_order(sizes):
        warmup = config.model_warmup.add(name=f"cuda_graph_bs{size}", batch_size=size, count=1)
        for tensor in config.input:
            warmup.inputs[tensor.name].CopyFrom(
                mc.ModelWarmup.Input(data_type=tensor.data_type, dims=tensor.dims, zero_data=True)
            )
