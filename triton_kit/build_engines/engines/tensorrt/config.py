"""config.pbtxt for a TensorRT plan, derived from the family's ONNX config.

Same name, tensors, dims and max_batch_size as the ONNX model it replaces (so
ensembles and clients do not change); platform ``tensorrt_plan``; GPU instance
groups listing the plan's profiles (Triton picks one by input shape); CUDA
graphs, gather-kernel threshold and warm-up as options.
"""

from __future__ import annotations

from collections.abc import Sequence

from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.engines.tensorrt.options import TensorRTOptions
from triton_kit.build_engines.engines.tensorrt.profiles import Profile

PLAN_FILENAME = "model.plan"
# Parameters only the onnxruntime backend understands.
_ONNXRUNTIME_PARAMETERS = ("intra_op_thread_count", "inter_op_thread_count", "execution_mode")


def tensorrt_plan_config(
    onnx_config: mc.ModelConfig,
    profiles: Sequence[Profile],
    options: TensorRTOptions,
    instances: int = 1,
) -> mc.ModelConfig:
    config = mc.ModelConfig()
    config.CopyFrom(onnx_config)
    config.platform = "tensorrt_plan"
    config.backend = ""
    config.default_model_filename = PLAN_FILENAME
    for key in _ONNXRUNTIME_PARAMETERS:
        if key in config.parameters:
            del config.parameters[key]
    del config.instance_group[:]
    config.instance_group.add(
        count=instances,
        kind=mc.ModelInstanceGroup.KIND_GPU,
        profile=[str(i) for i in range(len(profiles))],
    )
    if options.cuda_graphs:
        config.optimization.cuda.graphs = True
    if options.gather_kernel_buffer_threshold:
        config.optimization.gather_kernel_buffer_threshold = options.gather_kernel_buffer_threshold
    if options.warmup:
        for index, profile in enumerate(profiles):
            _add_warmup(config, profile, index)
    return config


def _add_warmup(config: mc.ModelConfig, profile: Profile, index: int) -> None:
    """A zero-filled request at this profile's opt shape (Triton picks the profile by shape),
    so no first user of any profile (BERT: one per bucket) pays for its set-up."""
    shapes = profile.as_dict()
    batched = config.max_batch_size > 0
    warmup = config.model_warmup.add(name=f"profile_{index}_opt_zeros", count=1)
    warmup.batch_size = shapes[config.input[0].name].opt[0] if batched else 1
    for tensor in config.input:
        opt = shapes[tensor.name].opt
        warmup.inputs[tensor.name].CopyFrom(
            mc.ModelWarmup.Input(
                data_type=tensor.data_type, dims=list(opt[1:] if batched else opt), zero_data=True
            )
        )
