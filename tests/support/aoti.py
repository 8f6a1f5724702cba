"""The opt-in pytorch_aoti backend and an ``--engine aoti`` ResNet-50 build, shared by the
build and integration tests (each takes minutes on two cores)."""

from __future__ import annotations

import time
from pathlib import Path

import tritonclient.grpc as grpcclient

from triton_kit.server.native_backends import default_out
from triton_kit.server.native_backends.__main__ import main
from triton_kit.server.native_backends.aoti import AOTI_BACKEND


def built_aoti_backend() -> Path:
    """``python -m triton_kit.server.native_backends build pytorch_aoti`` into the launcher's
    backend folder: skipped when an identical build is there, so tests share one."""
    assert main(["build", AOTI_BACKEND]) == 0, "building pytorch_aoti failed (see stderr)"
    return default_out() / AOTI_BACKEND


def build_resnet50_aoti(root: Path) -> tuple[Path, Path]:
    """``resnet50 --engine aoti`` into ``root``: (the repository, the build's verified ONNX)."""
    from triton_kit.build_engines.cli import build_from_argv

    argv = ["resnet50", "--engine", "aoti", "--output-repository", str(root / "repo")]
    build_from_argv([*argv, "--work-dir", str(root / "work")])
    return root / "repo", root / "work" / "resnet50" / "model.onnx"


def model_stats_after(url: str, model: str, inferences: int, timeout_s: float = 30.0):
    """The model's statistics once they count ``inferences``: the PT2 backend sends its
    responses before it reports statistics, so a client can read them before they land."""
    client = grpcclient.InferenceServerClient(url)
    deadline = time.monotonic() + timeout_s
    while True:
        (stats,) = client.get_inference_statistics(model).model_stats
        if stats.inference_count >= inferences or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)
