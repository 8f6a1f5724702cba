"""Past capacity, excess work is rejected fast and accepted work keeps a bounded p99 (item 6)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.integration.reliability.conftest import tiny_config, write_echo
from triton_kit.build_engines.cli import build_parser, family_options
from triton_kit.build_engines.repository import parse
from triton_kit.python_models.common.serving_policy import QueuePolicy
from triton_kit.server import TritonServer

pytestmark = pytest.mark.reliability
SERVICE_S = 0.2  # one batch of up to 4
CLIENTS = 48


def _queue_flags(*flags: str) -> QueuePolicy:
    """The policy ``python -m triton_kit.build_engines FAMILY --queue-policy bounded ...``
    writes."""
    args = build_parser().parse_args(["resnet50", "--queue-policy", "bounded", *flags])
    return family_options("resnet50", args).queue


def _one(url: str) -> tuple[bool, float, str]:
    x = httpclient.InferInput("X", [1, 1], "FP32")
    x.set_data_from_numpy(np.array([[SERVICE_S]], dtype=np.float32))
    start = time.perf_counter()
    try:
        with httpclient.InferenceServerClient(url, network_timeout=30) as client:
            client.infer("echo", [x])
        return True, time.perf_counter() - start, ""
    except InferenceServerException as exc:
        return False, time.perf_counter() - start, f"{exc.status()} {exc.message()}"


def test_the_default_keeps_prefetching_and_the_bound_is_written_when_asked(
    tmp_path: Path,
) -> None:
    """Off by default (Triton 2.51 stops prefetching under any policy field, see
    triton_kit/python_models/common/serving_policy.py); ``--queue-policy bounded`` writes every
    field."""
    config = parse((write_echo(tmp_path / "off", True) / "echo/config.pbtxt").read_text())
    assert config.HasField("dynamic_batching")
    assert not config.dynamic_batching.HasField("default_queue_policy")
    bounded = write_echo(tmp_path / "bounded", True, queue=_queue_flags())
    queue = parse((bounded / "echo/config.pbtxt").read_text()).dynamic_batching.default_queue_policy
    assert (queue.max_queue_size, queue.default_timeout_microseconds) == (128, 5_000_000)
    assert queue.allow_timeout_override and queue.timeout_action == queue.REJECT


def test_overload_is_rejected_fast_and_accepted_p99_stays_bounded(tmp_path: Path) -> None:
    timeout_s = 0.5  # and a queue of 4: small enough to overflow in a second
    queue = _queue_flags("--max-queue-size", "4", "--queue-timeout-ms", str(int(timeout_s * 1e3)))
    repo = write_echo(tmp_path / "repo", dynamic_batching=True, max_batch_size=4, queue=queue)
    with TritonServer(tiny_config(repo, tmp_path)) as server:
        url = server.http_url.removeprefix("http://")
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(lambda _: _one(url), range(CLIENTS * 2)))
        accepted = [t for ok, t, _ in results if ok]
        rejected = [(t, why) for ok, t, why in results if not ok]
        assert rejected, "nothing was rejected at 12x capacity"
        assert all(("400" not in why and "Exceeds maximum queue size" in why) or "timeout" in why
                   for _, why in rejected), rejected[:3]  # fmt: skip
        assert np.median([t for t, _ in rejected]) < 0.25, sorted(t for t, _ in rejected)[:5]
        # queue wait <= timeout, then one batch; slack for 2 shared cores
        bound = timeout_s + 2 * SERVICE_S + 0.6
        assert accepted and np.percentile(accepted, 99) < bound, np.percentile(accepted, 99)
        assert server.is_ready()


@pytest.mark.slow  # a model build
@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_a_family_built_with_the_flags_serves_with_its_bound(tmp_path: Path) -> None:
    """``nmt --architecture rnn`` (seconds to build) with a bound: Triton loads it, shows the
    policy in the served config, and translates."""
    from triton_kit.build_engines.cli import build_from_argv
    from triton_kit.client import TritonClient

    repo = tmp_path / "repo"
    flags = ["--queue-policy", "bounded", "--max-queue-size", "3", "--queue-timeout-ms", "2000"]
    paths = ["--output-repository", str(repo), "--work-dir", str(tmp_path / "work")]
    build_from_argv(["nmt", "--architecture", "rnn", "--instances", "1", *paths, *flags])
    with TritonServer(tiny_config(repo, tmp_path)) as server:
        with httpclient.InferenceServerClient(server.http_url.removeprefix("http://")) as http:
            policy = http.get_model_config("nmt_rnn")["dynamic_batching"]["default_queue_policy"]
        assert int(policy["max_queue_size"]) == 3 and policy["allow_timeout_override"]
        assert int(policy["default_timeout_microseconds"]) == 2_000_000
        assert policy["timeout_action"] == "REJECT"
        with TritonClient(server.grpc_url, timeout=60) as client:
            (french,) = client.translate(["twelve"], beam_size=2, model="nmt_rnn")
        assert french == "douze"
