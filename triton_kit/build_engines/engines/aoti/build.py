"""The files and config of one model built with ``--engine aoti``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.engines.aoti.config import PACKAGE_FILE, aoti_config
from triton_kit.build_engines.engines.aoti.options import AotiOptions
from triton_kit.build_engines.engines.aoti.package import compile_package
from triton_kit.build_engines.engines.torchscript.artifacts import TOLERANCE
from triton_kit.build_engines.engines.torchscript.script import (
    gpu_visible,
    parity_with_onnx,
    worst_parity,
)
from triton_kit.build_engines.steps import BuildError, info


def aoti_artifacts(
    name: str,
    module: torch.nn.Module,
    feeds: dict[str, np.ndarray],
    onnx_path: Path,
    onnx_config: mc.ModelConfig,
    *,
    precision: str,
    work_dir: Path,
    aoti: AotiOptions,
    check_feeds: Sequence[dict[str, np.ndarray]] = (),
    cuda_graphs: bool = False,
) -> tuple[mc.ModelConfig, dict[str, Path | bytes | str]]:
    """Compile ``module`` (exported on ``feeds``) into ``model.pt2``, check the loaded package
    against the verified ONNX on ``feeds``, their first row alone (another batch size of the
    dynamic dimension) and every ``check_feeds``; return the served config and files
    (``cuda_graphs``: replayed from CUDA graphs where a GPU serves it)."""
    gpu = gpu_visible()
    device = "cuda" if gpu else "cpu"
    if precision == "fp16" and not gpu:
        info(f"{name}: no GPU visible; an FP16 package will run slowly on CPU")
    package = compile_package(
        module,
        tuple(torch.from_numpy(v) for v in feeds.values()),
        Path(work_dir) / "aoti" / name / PACKAGE_FILE,
        max_batch_size=onnx_config.max_batch_size,
        precision=precision,
        device=device,
        cxx=aoti.cxx,
    )
    info(f"{name}: AOTInductor package {package} ({package.stat().st_size / 2**20:.1f} MiB)")
    first_row = {k: v[:1] for k, v in feeds.items()}
    checks = (feeds, first_row, *check_feeds)
    runner = torch._inductor.aoti_load_package(str(package))  # loaded once for every check
    worst = worst_parity(
        name,
        f"AOTInductor ({precision}, {device})",
        lambda check: parity_with_onnx(runner, onnx_path, check, device),
        checks,
    )
    if worst > TOLERANCE[precision]:
        raise BuildError(f"{name}: the AOTInductor package differs from ONNX by {worst:.3g}")
    if cuda_graphs and not gpu:
        info(f"{name}: no GPU visible; --cuda-graphs left out (a CPU instance has no graphs)")
    config = aoti_config(onnx_config, gpu=gpu, precision=precision, cuda_graphs=cuda_graphs)
    return config, {PACKAGE_FILE: package}
