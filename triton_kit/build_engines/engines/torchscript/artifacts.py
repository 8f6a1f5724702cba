"""The files and config of one model built with ``--engine torch``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.engines.torchscript.config import (
    NATIVE_PARAMETERS,
    batch_buckets,
    fixed_input_dims,
    torchscript_files,
    use_cuda_graphs,
)
from triton_kit.build_engines.engines.torchscript.script import (
    check_parity,
    gpu_visible,
    script_module,
    worst_parity,
)
from triton_kit.build_engines.steps import info

# Max difference to the FP32 ONNX Runtime output that a build accepts, on check_parity's
# scale (absolute within [-1, 1], relative to the output's largest magnitude beyond).
TOLERANCE = {"fp32": 1e-3, "fp16": 5e-2}


def torch_artifacts(
    name: str,
    module: torch.nn.Module,
    feeds: dict[str, np.ndarray],
    onnx_path: Path,
    onnx_config: mc.ModelConfig,
    precision: str,
    work_dir: Path,
    check_feeds: Sequence[dict[str, np.ndarray]] = (),
    cuda_graphs: bool = False,
) -> tuple[mc.ModelConfig, dict[str, Path | bytes | str]]:
    """Script ``module`` (traced on ``feeds``), check it against the verified ONNX on ``feeds``
    and every ``check_feeds`` (other shapes: a trace that baked one in fails here), return
    config+files."""
    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    if precision == "fp16" and not gpu:
        info(f"{name}: no GPU visible; FP16 TorchScript will run slowly on CPU")
    example = tuple(torch.from_numpy(v) for v in feeds.values())
    path = script_module(
        module, example, Path(work_dir) / "torch" / name / "model.pt", precision, device
    )
    worst = worst_parity(
        name,
        f"TorchScript ({precision}, {device})",
        lambda check: check_parity(path, onnx_path, check, device),
        (feeds, *check_feeds),
    )
    if worst > TOLERANCE[precision]:
        raise ValueError(f"{name}: TorchScript differs from ONNX by {worst:.3g}")
    config = torch_config(onnx_config, gpu, precision)
    graphs = cuda_graphs and gpu and _add_cuda_graphs(name, config)
    return config, dict(torchscript_files(path, graphs))


def _add_cuda_graphs(name: str, config: mc.ModelConfig) -> bool:
    """--cuda-graphs: the CUDA-graph python model where every input shape is fixed (one
    graph per batch bucket); otherwise Triton's own backend, said in the build log."""
    dims = fixed_input_dims(config)
    if dims is None or config.max_batch_size <= 0:
        info(f"{name}: --cuda-graphs needs fixed input shapes; served by Triton's own backend")
        return False
    use_cuda_graphs(config, batch_buckets(config.max_batch_size), dims)
    info(f"{name}: CUDA graphs for batches {batch_buckets(config.max_batch_size)}")
    return True


def torch_config(onnx_config: mc.ModelConfig, gpu: bool, precision: str) -> mc.ModelConfig:
    """The ONNX model's config, served by the PyTorch backend on GPU or CPU."""
    config = mc.ModelConfig()
    config.CopyFrom(onnx_config)
    config.platform = "pytorch_libtorch"
    config.default_model_filename = "model.pt"
    for key in ("intra_op_thread_count", "inter_op_thread_count"):
        config.parameters.pop(key, None)
    config.parameters["precision"].string_value = precision
    for key, value in NATIVE_PARAMETERS.items():
        config.parameters[key].string_value = value
    kind = mc.ModelInstanceGroup.KIND_GPU if gpu else mc.ModelInstanceGroup.KIND_CPU
    for group in config.instance_group:
        group.kind = kind
    return config
