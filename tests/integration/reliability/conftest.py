"""A tiny model repository in tmp, so lifecycle tests start the real Triton in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_kit.build_engines.repository import Tensor, python_model_config, write_model
from triton_kit.python_models.common.serving_policy import DEFAULT_QUEUE_POLICY, QueuePolicy
from triton_kit.server import ServerConfig

ECHO_MODEL = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
        time.sleep(max(float(x.reshape(-1)[0]) for x in xs))  # X: seconds one batch takes
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]) for x in xs]
"""


@pytest.fixture
def tiny_repository(tmp_path: Path) -> Path:
    """One python model ``echo``: Y = X after sleeping X[0] seconds."""
    return write_echo(tmp_path / "repo")


def write_echo(
    root: Path,
    dynamic_batching: bool = False,
    max_batch_size: int = 8,
    queue: QueuePolicy = DEFAULT_QUEUE_POLICY,
) -> Path:
    """``echo`` with the build's own dynamic batching (and ``queue``, its policy) if asked."""
    config = python_model_config(
        "echo",
        [Tensor("X", "FP32", (1,))],
        [Tensor("Y", "FP32", (1,))],
        max_batch_size,
        dynamic_batching_delay_us=0 if dynamic_batching else None,
        queue=queue,
    )
    write_model(root, config, {"model.py": ECHO_MODEL})
    return root


def tiny_config(repository: Path, tmp_path: Path, **overrides: object) -> ServerConfig:
    defaults = dict(
        model_repository=repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=tmp_path / "server.log",
        startup_timeout_s=120.0,
        exit_timeout_s=5,
    )
    return ServerConfig(**{**defaults, **overrides})
