"""The model-alone comparison: served config -> in-process sessions, Triton's statistics ->
per-request figures, ratios -> verdicts against the 0.95x goal."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from triton_kit.benchmarks.harness import model_alone, perf_analyzer
from triton_kit.benchmarks.harness.measure import Result, run_threads, write_keeping_discussion
from triton_kit.benchmarks.harness.model_alone import Comparison, Served, ServedOnnx, shares
from triton_kit.loadtest.triton_stats import ModelCounters

CONFIG = """
name: "tiny"
platform: "onnxruntime_onnx"
max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: 4 }
output { name: "y" data_type: TYPE_FP32 dims: 4 }
instance_group { count: 1 kind: KIND_CPU }
instance_group { count: 1 kind: KIND_CPU }
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
parameters { key: "inter_op_thread_count" value { string_value: "1" } }
parameters { key: "execution_mode" value { string_value: "1" } }
"""


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A one-model repository: y = x + 1 with a dynamic batch."""
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["x", "one"], ["y"])],
            "tiny",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
            [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    (tmp_path / "tiny" / "1").mkdir(parents=True)
    onnx.save(model, tmp_path / "tiny" / "1" / "model.onnx")
    (tmp_path / "tiny" / "config.pbtxt").write_text(CONFIG)
    return tmp_path


def test_the_served_config_sets_the_in_process_sessions(repository: Path) -> None:
    served = ServedOnnx.read(repository, "tiny")
    assert served.onnx == repository / "tiny" / "1" / "model.onnx"
    assert (served.settings.intra_op_threads, served.settings.inter_op_threads) == (1, 1)
    assert served.settings.parallel and served.instances == 2 and served.max_batch_size == 8
    assert served.backend == "onnxruntime (Triton's own, r24.10)"
    assert served.describe() == (
        "2 instance(s) x 1 intra-op thread(s), 1 inter-op, parallel execution"
    )
    sessions = served.sessions()
    assert len(sessions) == 2
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(sessions[1].run(None, {"x": x})[0], x + 1)


def test_in_flight_items_are_spread_over_the_instances_like_a_server_would() -> None:
    assert shares(1, 2) == [1]
    assert shares(16, 2) == [8, 8]
    assert shares(5, 2) == [3, 2]
    assert shares(16, 1) == [16]


def test_in_process_runs_each_session_with_its_share(repository: Path) -> None:
    sessions = ServedOnnx.read(repository, "tiny").sessions()
    data = np.zeros((8, 4), dtype=np.float32)
    alone = model_alone.in_process(sessions, lambda b: {"x": data[:b]}, 1, 0.2)
    assert alone.name == "in-process ORT, batch 1" and alone.concurrency == 1
    assert alone.items == len(alone.latencies_s) > 0
    both = model_alone.in_process(sessions, lambda b: {"x": data[:b]}, 3, 0.2)
    assert both.name == "in-process ORT, batch 2 + batch 1" and both.concurrency == 2
    assert len(both.latencies_s) <= both.items <= 2 * len(both.latencies_s)


def test_threads_run_concurrently_for_the_duration() -> None:
    result = run_threads("sleepers", [lambda: (time.sleep(0.02), 3)[1]] * 2, 0.3, warmup=1)
    assert 0 <= result.cpu_s < 0.1  # sleeping costs no CPU
    assert result.concurrency == 2
    assert 0.3 <= result.wall_s < 0.5
    calls = len(result.latencies_s)
    assert 17 <= calls <= 32  # one loop makes at most ~16 calls of 20 ms in 0.3 s: two ran
    assert result.items == 3 * calls


def test_triton_statistics_become_per_request_figures() -> None:
    counters = ModelCounters(
        success_count=40,
        queue_ns=40 * 2_000_000,
        compute_input_ns=40 * 100_000,
        compute_infer_ns=40 * 9_800_000,
        compute_output_ns=40 * 100_000,
        execution_count=10,
    )
    reported = {"items_per_s": 50.0, "p50": 12.0, "p99": 20.0}
    served = Served.from_window(4, reported, counters)
    assert (served.items_per_s, served.p50_ms, served.p99_ms) == (50.0, 12.0, 20.0)
    assert served.queue_ms == pytest.approx(2.0)
    assert served.compute_ms == pytest.approx(10.0)
    assert served.batch == 4.0


def local(items_per_s: float, name: str = "in-process ORT, batch 1") -> Result:
    return Result(name, 1, (0.01,) * 10, int(items_per_s), 1.0)


def served(items_per_s: float, concurrency: int = 1) -> Served:
    return Served(concurrency, items_per_s, 10.0, 20.0, 0.5, 9.0, 1.0)


def test_ratios_are_held_to_the_goal_per_load_point() -> None:
    rows = [
        Comparison("16 tokens", "concurrency 1", local(100), served(96)),
        Comparison("256 tokens", "concurrency 1", local(10), served(9)),
        Comparison("16 tokens", "saturation", local(200, "in-process ORT, batch 8 + batch 8"),
                   served(199, 16)),
    ]  # fmt: skip
    assert [r.met for r in rows] == [True, False, True]
    assert model_alone.verdicts(rows) == [
        "- concurrency 1: served / in-process 0.90x-0.96x: goal 0.95x NOT met (1 of 2 inputs).",
        "- saturation: served / in-process 0.99x: goal 0.95x met.",
    ]
    table = model_alone.comparison_table(rows).splitlines()
    assert table[2].startswith("| 16 tokens | concurrency 1 (c1) | batch 1 | 100 | 10 | 96 |")
    assert "| 0.90x NOT met |" in table[3]
    assert "| saturation (c16) | batch 8 + batch 8 |" in table[4]


def test_cpu_time_leaves_the_warm_up_out() -> None:
    def burn() -> int:
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        return 1

    result = run_threads("burners", [burn], 0.2, warmup=4)  # 0.2 s of warm-up, 0.2 measured
    assert result.cpu_s / result.items == pytest.approx(0.05, rel=0.3)


def test_slow_cells_get_windows_of_a_few_calls() -> None:
    fast = Result("x", 1, (0.01,) * 5, 5, 1.0)
    slow = Result("x", 1, (2.0,) * 5, 5, 10.0)
    assert model_alone.window_s(fast, 1.5) == 1.5
    assert model_alone.window_s(slow, 1.5) == pytest.approx(8.0)


def test_perf_analyzer_gets_each_requests_tensors_with_their_shapes(tmp_path: Path) -> None:
    ids = np.array([101, 2023, 102], dtype=np.int64)
    path = perf_analyzer.tensor_inputs(
        tmp_path / "data.json", [{"input_ids": ids, "attention_mask": np.ones_like(ids)}]
    )
    assert json.loads(Path(path).read_text()) == {
        "data": [
            {
                "input_ids": {"content": [101, 2023, 102], "shape": [3]},
                "attention_mask": {"content": [1, 1, 1], "shape": [3]},
            }
        ]
    }


def test_a_regenerated_report_keeps_its_discussion(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    write_keeping_discussion(path, "# Run 1\n")
    assert path.read_text() == "# Run 1\n\n## Discussion\n\n(none)\n"
    path.write_text("# Run 1\n\n## Discussion\n\nwritten by hand\n")
    write_keeping_discussion(path, "# Run 2\n| table |\n")
    assert path.read_text() == "# Run 2\n| table |\n\n## Discussion\n\nwritten by hand\n"


def test_the_in_process_halves_bracket_the_served_cell() -> None:
    events: list[str] = []

    def local_half(seconds: float) -> Result:
        events.append(f"local {seconds:g}")
        return Result("in-process ORT, batch 1", 1, (0.25,) * 4, 4, 1.0, cpu_s=0.5)

    def serve(window: float) -> Served:
        events.append(f"served {window:g}")
        return Served(1, 3.8, 260.0, 300.0, 0.1, 250.0, 1.0, cpu_ms=500.0)

    row = model_alone.compare("image", "concurrency 1", local_half, serve, 4.0)
    assert events == ["local 2", "served 2", "local 2"]
    assert isinstance(row, Comparison)
    assert (row.local.items, row.local.wall_s, len(row.local.latencies_s)) == (8, 2.0, 8)
    assert row.ratio == pytest.approx(3.8 / 4.0)
    assert row.local_cpu_ms == pytest.approx(125.0)  # 1 s of CPU over 8 items
    assert row.cpu_ratio == pytest.approx(125.0 / 500.0)


def test_a_served_cell_that_could_not_run_is_reported_not_compared() -> None:
    def local_half(seconds: float) -> Result:
        return Result("in-process ORT, batch 1", 1, (0.1,), 1, 0.1)

    assert model_alone.compare("x", "c1", local_half, lambda w: "not installed", 1.0) == (
        "not installed"
    )
