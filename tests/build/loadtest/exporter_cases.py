"""Cases of the Locust exporter; run by tests/build/loadtest/test_exporter.py in their own
interpreter.

A real Locust environment and runner record real request events; the exposition is fed to
``promtool check metrics`` (Prometheus' own parser and linter) and read back. The scrape by
a real Prometheus next to a real Triton is in tests/integration/deploy/test_prometheus.py.
"""

from __future__ import annotations

import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from locust import User
from locust.env import Environment

from tests.support.prerequisites import require_tool
from triton_kit.loadtest import exporter
from triton_kit.server import free_port


class _Idle(User):
    abstract = False


@pytest.fixture
def environment() -> Environment:
    env = Environment(user_classes=[_Idle])
    env.create_local_runner()
    # Locust's sliding window diffs against a snapshot taken ~10 s ago; an empty one here
    # puts every request below in the window.
    env.stats.get("bert sentence", "grpc")._cache_response_times(int(time.time()) - 10)
    fire = env.events.request.fire
    for milliseconds in range(1, 101):  # 1..100 ms: p50 = 50, p99 = 99 (Locust rounds)
        fire(request_type="grpc", name="bert sentence", response_time=milliseconds,
             response_length=0, exception=None, context={})  # fmt: skip
    fire(request_type="grpc", name='odd "name"', response_time=5, response_length=0,
         exception=RuntimeError("x"), context={})  # fmt: skip
    return env


def _sample(text: str, family: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(family + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {family} {labels} in:\n{text}")


def test_exposition_passes_promtool(environment: Environment) -> None:
    promtool = require_tool("promtool")
    text = exporter.render(environment)
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr + text


def test_counters_and_labels(environment: Environment) -> None:
    text = exporter.render(environment)
    labels = {"name": "bert sentence", "method": "grpc", "model": "bert"}
    assert _sample(text, "locust_requests_total", **labels) == 100
    assert _sample(text, "locust_failures_total", **labels) == 0
    assert _sample(text, "locust_failures_total", name='odd \\"name\\"', model="odd") == 1
    assert re.search(r"^locust_users\{\} 0$", text, re.M), text


def test_percentiles_are_seconds_over_the_sliding_window(environment: Environment) -> None:
    text = exporter.render(environment)
    labels = {"name": "bert sentence"}
    p50 = _sample(text, "locust_response_time_seconds", quantile="0.5", **labels)
    p99 = _sample(text, "locust_response_time_seconds", quantile="0.99", **labels)
    assert 0.050 <= p50 <= 0.051  # of 1..100 ms, by Locust's rank rule
    assert 0.099 <= p99 <= 0.100
    count = _sample(text, "locust_response_time_seconds_count", **labels)
    total = _sample(text, "locust_response_time_seconds_sum", **labels)
    assert (count, total) == (100, pytest.approx(sum(range(1, 101)) / 1000))
    # No snapshot from ~10 s ago: no window, so no percentile rather than a wrong one.
    assert 'locust_response_time_seconds{name="odd' not in text


def test_served_over_http_on_metrics_only(environment: Environment) -> None:
    port = free_port()
    server = exporter.start(environment, "127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert b"locust_requests_total{" in response.read()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
        assert missing.value.code == 404
    finally:
        server.stop()
