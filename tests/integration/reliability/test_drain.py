"""SIGTERM drains: in-flight ensemble and BLS work finishes, new work is refused (item 4).

The issue's reproduction used the full repository (32 ResNet-50 ensemble and 4 NMT
BLS requests in flight); this tiny repository has the same two shapes of in-flight
work, without depending on any family's internals: an ensemble whose second step is
still queued when the signal arrives, and a python BLS model calling a step model
several times.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.integration.reliability.conftest import ECHO_MODEL, write_echo
from tests.integration.reliability.test_lifecycle import _wait_ready
from tests.support.prerequisites import PROJECT_ROOT, require_models
from triton_kit.build_engines.repository import (
    Step,
    Tensor,
    ensemble_config,
    python_model_config,
    write_model,
)
from triton_kit.server import TritonServer, free_ports
from triton_kit.server.drain import Drainer, entry_models

pytestmark = pytest.mark.reliability
STEP_S = 0.6  # one batch of echo (8 rows): at most one batch ends before the signal
BLS_CALLS = 3
ENSEMBLE_REQUESTS = 24
BLS_REQUESTS = 4
EXIT_TIMEOUT_S = 20

BLS_MODEL = f"""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            error = None
            for _ in range({BLS_CALLS}):
                step = pb_utils.InferenceRequest(
                    model_name="echo",
                    inputs=[pb_utils.Tensor("X", x)],
                    requested_output_names=["Y"],
                ).exec()
                if step.has_error():
                    error = step.error()
                    break
                x = pb_utils.get_output_tensor_by_name(step, "Y").as_numpy()
            if error is not None:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    "step failed: " + error.message())))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
"""


def write_drain_repository(root: Path) -> Path:
    """``echo`` and ``tail`` (batched), ensemble ``chain`` = echo -> tail, BLS ``bls`` = echo x3.

    ``tail`` has no work until the first step's batches finish: Triton stops the
    scheduler of a model with nothing in flight at once, even when an ensemble
    still has requests heading for it.
    """
    write_echo(root, dynamic_batching=True)
    x, y = Tensor("X", "FP32", (1,)), Tensor("Y", "FP32", (1,))
    tail = python_model_config("tail", [x], [y], 8, dynamic_batching_delay_us=0)
    write_model(root, tail, {"model.py": ECHO_MODEL})
    chain = ensemble_config(
        "chain",
        [x],
        [y],
        8,
        [
            Step("echo", {"X": "X"}, {"Y": "MID"}),
            Step("tail", {"X": "MID"}, {"Y": "Y"}),
        ],
    )
    write_model(root, chain, {})
    bls = python_model_config("bls", [x], [y], 8, instances=BLS_REQUESTS)
    write_model(root, bls, {"model.py": BLS_MODEL})
    return root


def _infer(ports: dict[str, int], protocol: str, model: str) -> str:
    """'ok', or the error message."""
    lib = httpclient if protocol == "http" else grpcclient
    x = lib.InferInput("X", [1, 1], "FP32")
    x.set_data_from_numpy(np.array([[STEP_S]], dtype=np.float32))
    url = f"127.0.0.1:{ports[protocol]}"
    try:
        if protocol == "http":
            with httpclient.InferenceServerClient(url, network_timeout=60) as c:
                y = c.infer(model, [x]).as_numpy("Y")
        else:
            with grpcclient.InferenceServerClient(url) as c:
                y = c.infer(model, [x], client_timeout=60).as_numpy("Y")
    except Exception as exc:  # the message is the result
        return str(exc)
    return "ok" if np.allclose(y, [[STEP_S]]) else f"wrong output {y}"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_sigterm_lets_in_flight_ensemble_and_bls_work_finish(tmp_path: Path, protocol: str) -> None:
    repo = write_drain_repository(tmp_path / "repo")
    ports = dict(zip(("http", "grpc", "metrics"), free_ports(3), strict=True))
    port = ports["http"]
    launcher = subprocess.Popen(
        [sys.executable, "-m", "triton_kit.server", "serve", "--model-repository", str(repo),
         "--http-port", str(port), "--grpc-port", str(ports["grpc"]),
         "--metrics-port", str(ports["metrics"]), "--log-file", str(tmp_path / "server.log"),
         "--exit-timeout", str(EXIT_TIMEOUT_S)],
        cwd=PROJECT_ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_ready(port)
        models = ["chain"] * ENSEMBLE_REQUESTS + ["bls"] * BLS_REQUESTS
        with ThreadPoolExecutor(len(models)) as pool:
            futures = [pool.submit(_infer, ports, protocol, m) for m in models]
            time.sleep(0.7)  # all sent, at most one echo batch done: the rest is in flight
            in_flight = sum(not f.done() for f in futures)
            start = time.monotonic()
            launcher.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            late = _infer(ports, protocol, "chain")  # new work after the signal
            results = [f.result() for f in futures]
        code = launcher.wait(EXIT_TIMEOUT_S + 15)
        took = time.monotonic() - start
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
    failed = [(m, r) for m, r in zip(models, results, strict=True) if r != "ok"]
    assert in_flight >= len(models) // 2, f"only {in_flight} requests were in flight"
    assert not failed, f"{len(failed)} of {len(models)} in-flight requests failed: {failed[:4]}"
    assert late != "ok", "a request sent after SIGTERM was accepted"
    assert code == 0, f"launcher exited with {code}"
    assert took < EXIT_TIMEOUT_S, f"drain took {took:.1f} s"


def test_entry_models_of_the_shipped_repository(triton_server: TritonServer) -> None:
    """What the drain unloads first on the real repository: what clients call, no steps."""
    require_models("resnet50", "bert", "bert_ensemble", "nmt", "nmt_rnn")
    drainer = Drainer(triton_server.http_url, triton_server.api_key)
    ready = [name for name, state in drainer.states().items() if state == "READY"]
    expected = ["bert", "bert_ensemble", "nmt", "nmt_rnn", "resnet50", "resnet50_uint8"]
    assert entry_models(drainer.configs(ready)) == expected


def test_entry_models_skip_steps_and_non_python_models() -> None:
    """A python step of an ensemble is no entry; a standalone python model (BLS) is, and so
    is the kit's ctranslate2 backend in text mode (the default nmt), not in its ids mode."""
    configs = {
        "pipe": {"platform": "ensemble", "ensemble_scheduling": {"step": [
            {"model_name": "pre"}, {"model_name": "net"}]}},
        "pre": {"backend": "python"},
        "net": {"platform": "onnxruntime_onnx", "backend": "onnxruntime"},
        "search": {"backend": "python"},
        "decoder": {"platform": "onnxruntime_onnx", "backend": "onnxruntime"},
        "text": {"backend": "ctranslate2", "parameters": {
            "source_spm": {"string_value": "source.spm"}}},
        "ids": {"backend": "ctranslate2", "parameters": {"beam_size": {"string_value": "4"}}},
    }  # fmt: skip
    assert entry_models(configs) == ["pipe", "search", "text"]
