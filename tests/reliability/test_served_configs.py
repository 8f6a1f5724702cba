"""What the served repository shows a client: no build paths, bounded queues (items 6, 14)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.conftest import require_models

pytestmark = pytest.mark.reliability
MODELS = ("resnet50", "bert", "nmt")
# A queue policy turns off Triton's prefetching, and these models' early responses then
# cost a 500 ms batcher stall per request (build_engines/nmt/repository.py).
PREFETCHING = {"nmt", "nmt_rnn"}


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


def test_every_dynamically_batched_model_has_a_bounded_queue(triton_server) -> None:
    require_models(*MODELS)
    batched = {n: c for n, c in _served_configs(triton_server).items() if c.get("dynamic_batching")}
    assert {"bert_model", "resnet50_model", "nmt"} <= set(batched)
    for name, config in batched.items():
        policy = config["dynamic_batching"].get("default_queue_policy", {})
        if name in PREFETCHING:  # Triton may show the policy's defaults: all must be off
            assert int(policy.get("max_queue_size", 0)) == 0, name
            assert int(policy.get("default_timeout_microseconds", 0)) == 0, name
            assert not policy.get("allow_timeout_override", False), name
            continue
        assert int(policy.get("max_queue_size", 0)) > 0, name
        assert int(policy.get("default_timeout_microseconds", 0)) > 0, name
        assert policy.get("allow_timeout_override") is True, name
