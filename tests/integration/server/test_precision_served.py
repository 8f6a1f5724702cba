"""A lowered (FP16 and INT8) model, written by the build hook, served by the embedded Triton.

Same outputs over HTTP as ONNX Runtime in-process: the python onnxruntime backend
loads Q/DQ and FP16 graphs like any other ONNX.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.build_engines import serving
from triton_kit.build_engines.engines.onnx_export import export
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.precision import CalibrationSettings, to_int8
from triton_kit.build_engines.precision.report import session
from triton_kit.build_engines.repository import Tensor, onnx_model_config, write_model


def _feeds(count: int, seed: int):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((4, 32), dtype=np.float32)} for _ in range(count)]


# Lowest per-row cosine to FP32 that a correct lowering keeps (computed here, not imported).
MIN_COSINE = {"tiny_fp16": 0.999, "tiny_int8": 0.98}


def _tiny_fp32(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(), torch.nn.Linear(64, 8)
    )
    return export(
        net,
        (torch.zeros(2, 32),),
        tmp_path / "m.onnx",
        ["x"],
        ["y"],
        {"x": {0: "b"}, "y": {0: "b"}},
    )


def _min_cosine(reference: np.ndarray, candidate: np.ndarray) -> float:
    cosine = np.sum(reference * candidate, axis=1) / (
        np.linalg.norm(reference, axis=1) * np.linalg.norm(candidate, axis=1)
    )
    return float(cosine.min())


@pytest.mark.slow
def test_lowered_models_are_served_by_triton(tmp_path: Path) -> None:
    from tritonclient import http

    from triton_kit.server import ServerConfig, TritonServer

    fp32 = _tiny_fp32(tmp_path)
    repo, lowered = tmp_path / "repo", {}
    for precision in ("fp16", "int8"):
        args = BuildOptions(precision=precision, work_dir=tmp_path / "build", threads=1)
        name = f"tiny_{precision}"
        config = onnx_model_config(
            name, [Tensor("x", "FP32", (32,))], [Tensor("y", "FP32", (8,))], 8
        )
        config, files = serving.serving_artifacts(name, fp32, config, args, lambda: _feeds(12, 1))
        write_model(repo, config, files)
        lowered[name] = files["model.onnx"]
    batch = _feeds(1, 2)[0]["x"]
    server_config = ServerConfig(model_repository=repo, http_port=0, grpc_port=0, metrics_port=0)
    server_config.log_file = tmp_path / "triton.log"
    with TritonServer(server_config) as server:
        client = http.InferenceServerClient(server.http_url.removeprefix("http://"))
        for name, path in lowered.items():
            request = http.InferInput("x", list(batch.shape), "FP32")
            request.set_data_from_numpy(batch)
            served = client.infer(name, [request]).as_numpy("y")
            expected = session(path).run(None, {"x": batch})[0]
            np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-5)
            reference = session(fp32).run(None, {"x": batch})[0]
            assert _min_cosine(reference, served) > MIN_COSINE[name], (name, reference, served)
        client.close()


# A CPU without VNNI (AVX2 only, as the 2-core AMD EPYC machines of earlier sessions), run
# with QEMU's user-mode emulator: ONNX Runtime picks its x86 INT8 kernel from CPUID.
NO_VNNI_CPU = "EPYC-Rome"
RUN_ONNX = """
import sys
import numpy as np
from triton_kit.python_models.common.ort_session import create_session
x = np.load(sys.argv[1])
for model in sys.argv[2:]:
    np.save(model + ".y.npy", create_session(model).run(None, {"x": x})[0])
"""


def _eight_bit_weights(fp32: Path, cache: Path, dst: Path) -> Path:
    """The same Q/DQ graph from the same ranges, with full 8-bit weights (the control)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    quantize_static(
        str(fp32),
        str(dst),
        calibration_data_reader=None,
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["Gemm", "MatMul"],
        per_channel=True,
        reduce_range=False,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
        calibration_cache_path=str(cache),
    )
    return dst


@pytest.mark.slow
def test_int8_holds_on_a_cpu_without_vnni(tmp_path: Path) -> None:
    """The INT8 graph run on an AVX2-only CPU, where ONNX Runtime sums two u8 x s8 products
    into a saturating int16: the built graph keeps its accuracy; the control with 8-bit
    weights shows the emulated kernel does saturate (else there is nothing to check)."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None or platform.machine() != "x86_64":
        pytest.skip(
            "needs qemu-x86_64 (Debian qemu-user: scripts/install-system-deps.sh) on an x86-64 "
            "host to emulate the CPU"
        )
    fp32 = _tiny_fp32(tmp_path)
    settings = CalibrationSettings()
    built = to_int8(fp32, tmp_path / "built.onnx", lambda: _feeds(12, 1), settings, tmp_path / "c")
    control = _eight_bit_weights(fp32, built.cache_path, tmp_path / "control.onnx")
    batch = _feeds(1, 2)[0]["x"]
    np.save(tmp_path / "x.npy", batch)
    command = [qemu, "-cpu", NO_VNNI_CPU, sys.executable, "-c", RUN_ONNX, str(tmp_path / "x.npy")]
    root = PROJECT_ROOT
    subprocess.run([*command, str(built.path), str(control)], check=True, cwd=root, timeout=300)
    reference = session(fp32).run(None, {"x": batch})[0]
    emulated = {p.name: np.load(f"{p}.y.npy") for p in (built.path, control)}
    if _min_cosine(reference, emulated["control.onnx"]) > MIN_COSINE["tiny_int8"]:
        pytest.skip("8-bit weights do not saturate on this ONNX Runtime's emulated kernel")
    assert _min_cosine(reference, emulated["built.onnx"]) > MIN_COSINE["tiny_int8"], emulated
