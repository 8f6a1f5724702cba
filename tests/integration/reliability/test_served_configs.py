"""What the served repository shows a client: no build paths (item 14), prefetching queues."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.support.prerequisites import require_models

pytestmark = pytest.mark.reliability
MODELS = ("resnet50", "bert", "nmt")


def _strings(value: object):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _served_configs(triton_server) -> dict[str, dict]:
    configs = {}
    for name in sorted(
        p.parent.name for p in triton_server.config.model_repository.glob("*/config.pbtxt")
    ):
        with urllib.request.urlopen(f"{triton_server.http_url}/v2/models/{name}/config") as resp:
            configs[name] = json.load(resp)
    return configs


def test_no_served_config_leaks_an_absolute_path(triton_server) -> None:
    require_models(*MODELS)
    for name, config in _served_configs(triton_server).items():
        for text in _strings(config.get("parameters", {})):
            assert "/work/" not in text and not any(
                word.startswith(("/home", "/tmp", "/work", "/root", "/usr"))
                for word in text.split()
            ), (name, text)


def test_every_dynamically_batched_model_keeps_prefetching(triton_server) -> None:
    """No queue-policy field: any of them stops Triton 2.51's prefetching and a lone
    client's requests then wait up to 500 ms (triton_kit/python_models/common/serving_policy.py)."""
    require_models(*MODELS)
    batched = {n: c for n, c in _served_configs(triton_server).items() if c.get("dynamic_batching")}
    assert {"bert_model", "resnet50_model", "nmt"} <= set(batched)
    for name, config in batched.items():
        policy = config["dynamic_batching"].get("default_queue_policy", {})
        # Triton may show the policy's defaults: all must be off
        assert int(policy.get("max_queue_size", 0)) == 0, name
        assert int(policy.get("default_timeout_microseconds", 0)) == 0, name
        assert not policy.get("allow_timeout_override", False), name
