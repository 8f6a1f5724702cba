"""``python -m triton_kit.loadtest tune --apply`` end to end: Model Analyzer, perf_analyzer and the
embedded tritonserver for real, on a tiny ONNX model in a temporary repository (two configs,
one concurrency, half-second windows: about 30 s here, most of it Triton starting).

The model as built waits 60 ms in the dynamic batcher for company that never comes at
concurrency 1, so it cannot meet a 40 ms p99; the variant without the wait can, which makes
the choice, and so what --apply must change, known in advance."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import onnx
from google.protobuf import text_format
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines import tuned
from triton_kit.build_engines.repository import Tensor, onnx_model_config, write_model
from triton_kit.loadtest.tune import cli
from triton_kit.loadtest.tune.summary import CONFIG, INSTANCES

SLO_MS = 40
BUILT_DELAY_US = 60_000
MODEL = "toy_model"


def tiny_onnx() -> bytes:
    """y = relu(x @ W): [batch, 16] -> [batch, 16]."""
    weight = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((16, 16), dtype=np.float32), "W"
    )
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "toy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_tune_chooses_a_profiled_config_within_the_slo_and_applies_exactly_it(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    config = onnx_model_config(
        MODEL,
        [Tensor("x", "FP32", (16,))],
        [Tensor("y", "FP32", (16,))],
        max_batch_size=8,
        instances=1,
        threads=1,
        dynamic_batching_delay_us=BUILT_DELAY_US,
    )
    model_dir = write_model(repo, config, {"model.onnx": tiny_onnx()})
    original = text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())
    out = tmp_path / "report"

    code = cli.main(
        [MODEL, "--slo-p99-ms", str(SLO_MS), "--instances", "1", "--queue-delays-us", "0",
         "--concurrency", "1", "--measurement-ms", "500", "--model-repository", str(repo),
         "--out", str(out), "--apply"]
    )  # fmt: skip

    assert code == 0
    with (out / MODEL / "model-analyzer" / "results" / "metrics-model-inference.csv").open() as f:
        rows = list(csv.DictReader(f))
    profiled = {row[CONFIG]: row for row in rows}
    assert set(profiled) == {f"{MODEL}_config_default", f"{MODEL}_config_0"}
    result = json.loads((out / "summary.json").read_text())["models"][MODEL]
    chosen = result["chosen"]
    assert chosen == f"{MODEL}_config_0" and chosen in profiled
    default = next(c for c in result["configs"] if c["as_built"])
    assert default["verdict"].startswith("over the SLO")
    best = next(c["best"] for c in result["configs"] if c["config"] == chosen)
    assert 0 < best["p99_ms"] <= SLO_MS and best["throughput"] > 0
    assert f"**Chosen: {chosen}" in (out / "summary.md").read_text()
    assert (out / f"{MODEL}.png").stat().st_size > 0 and (out / "index.html").is_file()

    applied = text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())
    expected = mc.ModelConfig()
    expected.CopyFrom(original)
    expected.instance_group[0].count = int(profiled[chosen][INSTANCES].split(":")[0])
    expected.dynamic_batching.max_queue_delay_microseconds = 0
    assert applied == expected  # the chosen queue delay and instance count, nothing else
    assert applied.dynamic_batching.max_queue_delay_microseconds != BUILT_DELAY_US
    record = tuned.read(model_dir)
    assert record is not None and record.paths == (
        "instance_group",
        "dynamic_batching.max_queue_delay_microseconds",
    )
