"""The built ``bert`` gives its thread budget to the encoder's backend, not to the stub.

Why (issue 31): the ``bert`` stub only tokenises and pads, then calls ``bert_model`` through
BLS; Triton's own onnxruntime backend runs the encoder. So ``bert_model`` is ONE instance
with every thread (N single-thread sessions on a lone client's calls run on each other's
evicted caches: benchmarks/results/bert_topology.md), and its batcher never waits and has
no bounded queue (a BLS call from an idle stub must not wait for a queue delay, nor for
Triton 2.51's 500 ms poll that any queue policy brings). Read from the built
model_repository (``make models``) with Triton's schema; the budget expected here is the
build's default (2 instances x the cores split between them), restated.
"""

from __future__ import annotations

import os
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.families.bert import embedding_topology
from triton_kit.build_engines.options import BuildOptions

SESSION_KEYS = ("intra_op_thread_count", "inter_op_thread_count")


def _config(repository: Path, name: str) -> mc.ModelConfig:
    path = repository / name / "config.pbtxt"
    return text_format.Parse(path.read_text(), mc.ModelConfig())


def test_the_encoder_backend_holds_every_thread_in_one_instance(model_repository: Path) -> None:
    encoder = _config(model_repository, "bert_model")
    assert encoder.platform == "onnxruntime_onnx" and not encoder.backend.startswith("python")
    assert [group.count for group in encoder.instance_group] == [1]
    cores = os.cpu_count() or 1
    budget = 2 * max(1, cores // 2)  # 2 instances x the cores split between them
    assert encoder.parameters["intra_op_thread_count"].string_value == str(budget)
    assert encoder.parameters["inter_op_thread_count"].string_value == "1"


def test_the_stub_is_one_instance_that_holds_no_session(model_repository: Path) -> None:
    bert = _config(model_repository, "bert")
    assert bert.backend == "python"
    assert [group.count for group in bert.instance_group] == [1]
    assert not [key for key in bert.parameters if key in SESSION_KEYS or key.startswith("session.")]
    assert bert.parameters["encoder_model"].string_value == "bert_model"
    encoder = _config(model_repository, "bert_model")
    assert bert.parameters["encoder_max_batch_size"].string_value == str(encoder.max_batch_size)


def test_the_encoder_batcher_never_waits(model_repository: Path) -> None:
    batching = _config(model_repository, "bert_model").dynamic_batching
    assert batching.max_queue_delay_microseconds == 0
    assert not batching.HasField("default_queue_policy")
    assert not batching.preferred_batch_size


def test_other_engines_keep_n_instances_of_both() -> None:
    options = BuildOptions(family="bert", instances=3, threads=2)
    assert embedding_topology(options).encoder_instances == 1
    assert embedding_topology(options).encoder_threads == 6
    assert embedding_topology(options).stub_instances == 1
    torch = embedding_topology(
        BuildOptions(family="bert", engine=Engine.TORCH, instances=3, threads=2)
    )
    assert (torch.stub_instances, torch.encoder_instances, torch.encoder_threads) == (3, 3, 2)
