"""The files and config of one model built with ``--engine torch``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tritonclient.grpc import model_config_pb2 as mc

from build_engines.steps import info
from build_engines.torch_engine.script import check_parity, gpu_visible, script_module

# Max abs difference to the FP32 ONNX Runtime output that a build accepts.
TOLERANCE = {"fp32": 1e-3, "fp16": 5e-2}


def torch_artifacts(
    name: str,
    module: torch.nn.Module,
    feeds: dict[str, np.ndarray],
    onnx_path: Path,
    onnx_config: mc.ModelConfig,
    precision: str,
    work_dir: Path,
) -> tuple[mc.ModelConfig, dict[str, Path | bytes | str]]:
    """Script ``module``, check it against the verified ONNX on ``feeds``, return config+files."""
    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    if precision == "fp16" and not gpu:
        info(f"{name}: no GPU visible; FP16 TorchScript will run slowly on CPU")
    example = tuple(torch.from_numpy(v) for v in feeds.values())
    path = script_module(
        module, example, Path(work_dir) / "torch" / name / "model.pt", precision, device
    )
    diffs = check_parity(path, onnx_path, feeds, device)
    info(f"{name}: TorchScript ({precision}, {device}) vs ONNX Runtime max abs diff {diffs}")
    worst = max(diffs.values())
    if worst > TOLERANCE[precision]:
        raise ValueError(f"{name}: TorchScript differs from ONNX by {worst:.3g}")
    return torch_config(onnx_config, gpu, precision), {"model.pt": path}


def torch_config(onnx_config: mc.ModelConfig, gpu: bool, precision: str) -> mc.ModelConfig:
    """The ONNX model's config, served by the PyTorch backend on GPU or CPU."""
    config = mc.ModelConfig()
    config.CopyFrom(onnx_config)
    config.platform = "pytorch_libtorch"
    config.default_model_filename = "model.pt"
    for key in ("intra_op_thread_count", "inter_op_thread_count"):
        config.parameters.pop(key, None)
    config.parameters["precision"].string_value = precision
    kind = mc.ModelInstanceGroup.KIND_GPU if gpu else mc.ModelInstanceGroup.KIND_CPU
    for group in config.instance_group:
        group.kind = kind
    return config
