"""The end-to-end pipelines benchmark's pieces that need no server: options, build commands,
perf_analyzer's input files, Triton's statistics per step, the in-process loop, the stand-in
for a python model's initialize, and the report.

Expected figures are worked by hand from the counters given."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from tests.support import pb_utils_standin as standin
from triton_kit.benchmarks.gpu.pipelines import build, local, served
from triton_kit.benchmarks.gpu.pipelines.options import MODELS, parse
from triton_kit.benchmarks.gpu.pipelines.report import markdown
from triton_kit.benchmarks.harness import perf_analyzer
from triton_kit.build_engines.repository import Tensor, python_model_config, write_model
from triton_kit.loadtest.triton_stats import ModelCounters
from triton_kit.python_models.common.base import PythonModel

# -- options and builds --------------------------------------------------------------------


def test_defaults_measure_the_goal_models_first_within_the_budget(tmp_path: Path) -> None:
    options = parse(["--out", str(tmp_path)])
    assert options.models == MODELS and MODELS[:2] == ("resnet50", "bert")
    assert options.families == ("resnet50", "bert", "nmt")  # resnet50_uint8 is resnet50's
    assert options.seconds == 2.0 and options.stability == 20 and options.budget_s == 300
    assert options.levels("resnet50") == (1, 64, 256) and options.levels("nmt") == (1, 32)
    smoke = parse(["--out", str(tmp_path), "--smoke", "--models", "bert"])
    assert (smoke.seconds, smoke.stability, smoke.levels("bert")) == (1.0, 1000, (1, 2))
    assert smoke.families == ("bert",)
    assert smoke.command.endswith("--out " + str(tmp_path) + " --smoke --models bert")


def test_an_unknown_model_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        parse(["--out", str(tmp_path), "--models", "resnet50,gpt"])
    assert "unknown ['gpt']" in capsys.readouterr().err


def test_builds_are_the_kits_torch_builds_fp16_on_a_gpu(tmp_path: Path) -> None:
    options = parse(["--out", str(tmp_path), "--tokenizer", "/carry/tokenizer.json"])
    repo, work = tmp_path / "repo", tmp_path / "work"
    resnet = build.plan("resnet50", options, repo, work, gpu=True)
    assert resnet.argv[:3] == ("resnet50", "--engine", "torch")
    assert "--checkpoint" not in resnet.argv  # the family's defaults: its GPU batching
    assert resnet.argv[resnet.argv.index("--precision") + 1] == "fp16"
    bert = build.plan("bert", options, repo, work, gpu=False)
    assert bert.argv[bert.argv.index("--precision") + 1] == "fp32"
    assert bert.argv[bert.argv.index("--shape") + 1] == "minilm-l6"
    assert bert.argv[bert.argv.index("--checkpoint") + 1] == "/carry"  # its tokenizer.json
    nmt = build.plan("nmt", options, repo, work, gpu=True)
    assert nmt.argv == ("nmt", "--engine", "torch", "--output-repository", str(repo),
                        "--work-dir", str(work))  # fmt: skip
    assert nmt.command.startswith("python -m triton_kit.build_engines nmt --engine torch")


def test_a_failed_build_raises_with_its_log(tmp_path: Path) -> None:
    broken = build.Build("nmt", ("nmt", "--no-such-flag"))
    with pytest.raises(RuntimeError, match="no-such-flag"):
        build.run_build(broken, tmp_path / "build.log")


# -- perf_analyzer's input files -------------------------------------------------------------


def test_bytes_inputs_send_triton_serialised_elements(tmp_path: Path) -> None:
    path = perf_analyzer.bytes_inputs(tmp_path / "in.json", "IMAGE", [b"\xff\xd8\xffab", b""])
    steps = json.loads(Path(path).read_text())["data"]
    raw = [base64.b64decode(step["IMAGE"]["b64"]) for step in steps]
    assert raw == [struct.pack("<I", 5) + b"\xff\xd8\xffab", b"\x00\x00\x00\x00"]


def test_array_inputs_carry_raw_bytes_and_shape(tmp_path: Path) -> None:
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    path = perf_analyzer.array_inputs(tmp_path / "in.json", "IMAGE_UINT8", [image])
    (step,) = json.loads(Path(path).read_text())["data"]
    assert step["IMAGE_UINT8"]["shape"] == [2, 3, 3]
    assert base64.b64decode(step["IMAGE_UINT8"]["b64"]) == image.tobytes()


# -- Triton's statistics per step --------------------------------------------------------------


def test_step_statistics_per_request_and_busy_share() -> None:
    deltas = {
        # 40 requests in 10 executions of 4; each charged its execution's 5 ms (+1 ms queue)
        "pre": ModelCounters(success_count=40, execution_count=10, inference_count=40,
                             queue_ns=40 * 1_000_000, compute_infer_ns=40 * 5_000_000),
        "ensemble": ModelCounters(success_count=40, compute_infer_ns=40 * 9_000_000),
        # a BLS callee: 3 requests of 8 rows in 3 executions
        "engine": ModelCounters(success_count=3, execution_count=3, inference_count=24,
                                compute_input_ns=3 * 2_000_000, compute_infer_ns=3 * 8_000_000),
    }  # fmt: skip
    rows = served.step_statistics(deltas, wall_s=0.1, instances={"pre": 1, "engine": 2})
    pre = rows["pre"]
    assert (pre["requests_per_execution"], pre["queue_ms"], pre["compute_infer_ms"]) == (4, 1, 5)
    assert pre["busy"] == 0.5  # 10 executions x 5 ms over 1 instance x 100 ms
    assert rows["ensemble"]["busy"] is None and rows["ensemble"]["instances"] == 0
    engine = rows["engine"]
    assert (engine["rows_per_execution"], engine["compute_input_ms"]) == (8, 2)
    assert engine["busy"] == 0.15  # 3 x 10 ms over 2 instances x 100 ms


def test_instance_counts_read_the_configs(tmp_path: Path) -> None:
    config = python_model_config("pre", [Tensor("A", "FP32", (1,))], [], 4, instances=3)
    write_model(tmp_path, config)
    assert served.instance_counts(tmp_path) == {"pre": 3}


# -- in process ---------------------------------------------------------------------------------


def test_a_call_takes_batch_requests_in_rotation_and_times_each_stage() -> None:
    seen: list[list[int]] = []

    def first(requests: list) -> list:
        seen.append([int(r["X"][0, 0]) for r in requests])
        return requests

    pipeline = local.Pipeline(
        model="m",
        max_batch=3,
        request=lambda item: {"X": np.array([[item]])},
        stages=[("first", first), ("second", lambda values: values)],
    )
    pipeline.clock.add("inner (inside)", 0.0)  # timed inside a stage: listed after the stages
    row = local.measure(pipeline, [10, 11, 12, 13], batch=3, seconds=0.0)
    assert seen[:3] == [[10, 11, 12], [13, 10, 11], [12, 13, 10]]  # two warm calls, then timed
    assert row["batch"] == 3 and row["calls"] == local.MIN_CALLS
    assert list(row["phases_ms"]) == ["first", "second"]  # the warm calls' clock was cleared
    assert row["items_per_s"] > 0 and row["p50"] >= 0


def test_a_request_that_fails_in_a_stage_fails_the_call() -> None:
    pipeline = local.Pipeline(
        model="m",
        max_batch=1,
        request=lambda item: {"X": np.array([[item]])},
        stages=[("pre", lambda values: [ValueError("bad image")])],
    )
    with pytest.raises(RuntimeError, match="m: pre failed: bad image"):
        pipeline([{"X": np.zeros((1, 1))}])


class _Labelled(PythonModel):
    def setup(self) -> None:
        self.label = self.params.str("label", "none")


def test_local_model_gives_what_initialize_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in for PythonModel.initialize must not drift from it: the same attributes,
    the same values (but the config dict, whose int64 fields JSON gives as strings)."""
    from google.protobuf import json_format

    standin.install(monkeypatch, "triton_kit.python_models.common.base")
    config = python_model_config(
        "m",
        [Tensor("A", "FP32", (-1,)), Tensor("TEXT", "STRING", (1,))],
        [Tensor("OUT", "FP32", (2,)), Tensor("LABELS", "STRING", (1,))],
        8,
        parameters={"label": "x"},
    )
    config.input[1].optional = True
    write_model(tmp_path, config)
    served_model = _Labelled()
    served_model.initialize(
        {
            "model_config": json_format.MessageToJson(config, preserving_proto_field_name=True),
            "model_name": "m",
            "model_repository": str(tmp_path / "m"),
            "model_version": "1",
        }
    )
    here = local.local_model(_Labelled, tmp_path, "m")
    mine, theirs = vars(here), vars(served_model)
    assert set(mine) == set(theirs)
    assert {k: v for k, v in mine.items() if k not in ("model_config", "params")} == {
        k: v for k, v in theirs.items() if k not in ("model_config", "params")
    }
    assert here.params.as_dict() == served_model.params.as_dict() == {"label": "x"}
    assert here.output_dtypes == {"OUT": np.dtype(np.float32), "LABELS": np.dtype(np.object_)}


# -- the report -----------------------------------------------------------------------------


def _served_row(concurrency: int, items_per_s: float, p50: float, busy: float) -> dict:
    step = {"instances": 1, "requests": 10, "requests_per_execution": 2.0,
            "rows_per_execution": 2.0, "queue_ms": 1.0, "compute_input_ms": 0.1,
            "compute_infer_ms": 3.0, "compute_output_ms": 0.2, "busy": busy}  # fmt: skip
    return {"concurrency": concurrency, "items_per_s": items_per_s, "p50": p50, "p95": p50,
            "p99": p50, "wall_s": 3.0, "steps": {"resnet50_preprocess": step,
            "resnet50_model": {**step, "busy": busy / 2}}}  # fmt: skip


def _local_row(batch: int, items_per_s: float, p50: float) -> dict:
    return {"batch": batch, "calls": 5, "items_per_s": items_per_s, "p50": p50, "p95": p50,
            "p99": p50, "phases_ms": {"resnet50_preprocess": 1.0}}  # fmt: skip


def _data() -> dict:
    """A run's results with a row in every table."""
    sdk_row = {"calls": 4, "items_per_s": 80.0, "p50": 12.0, "p95": 13.0, "p99": 14.0}
    return {
        "env": {"gpu": "H100", "commit": "abc"},
        "settings": {"seconds": 2.0, "stability": 20},
        "build resnet50": {
            "command": "python -m triton_kit.build_engines resnet50",
            "seconds": 30.0,
            "log": "build-resnet50.log",
        },
        "in-process resnet50": {
            "max_batch": 256,
            "notes": {"pre": "torch on cuda:0"},
            "bs1": _local_row(1, 200.0, 5.0),
            "bs256": _local_row(256, 10000.0, 25.6),
        },
        "served resnet50": {
            "c1": _served_row(1, 150.0, 6.5, 0.3),
            "c256": _served_row(256, 7000.0, 30.0, 0.97),
            "c64": {"skipped": "time budget spent"},
        },
        "sdk resnet50": {"method": "classify", "sequential": sdk_row, "batch64": sdk_row},
        "skipped": {"served bert": "time budget spent"},
        "errors": {"build nmt": "Traceback ...\nRuntimeError: boom"},
    }


def test_report_summary_ratio_goal_and_busiest_step() -> None:
    text = markdown(_data(), "python -m triton_kit.benchmarks.gpu.pipelines --out o")
    summary = next(line for line in text.splitlines() if line.startswith("| `resnet50` | 7,000"))
    cells = [cell.strip() for cell in summary.strip("|").split("|")]
    assert cells[2:11] == ["c256", "10,000", "256", "0.70×", "≥ 0.8× (not met)", "6.50",
                           "5.00", "1.50", "`resnet50_preprocess` (97%)"]  # fmt: skip
    assert "| `resnet50` | c64 | time budget spent |" in text
    assert "- skipped `served bert`: time budget spent" in text
    assert "RuntimeError: boom" in text
    assert "`resnet50` ran pre: torch on cuda:0." in text


def test_every_column_is_defined_under_its_table() -> None:
    lines = markdown(_data(), "command").splitlines()
    tables = 0
    for index, line in enumerate(lines):
        if line.startswith("|---") and not lines[index - 1].startswith("| run |"):
            header = [cell.strip() for cell in lines[index - 1].strip("|").split("|")]
            below = "\n".join(lines[index + 1 : index + 60])
            missing = [name for name in header if f"- *{name}*: " not in below]
            assert not missing, (lines[index - 1], missing)
            tables += 1
    assert tables == 6  # summary, served, statistics, in process, SDK, builds (not the header)


def test_no_step_starts_once_the_budget_is_spent(tmp_path: Path) -> None:
    from triton_kit.benchmarks.gpu.pipelines.run import JSON_NAME, REPORT_NAME, Run

    run = Run(parse(["--out", str(tmp_path), "--budget-s", "0"]), {"gpu": "none"})
    assert run.step("served bert", lambda: pytest.fail("a step ran past the budget")) is None
    saved = json.loads((tmp_path / JSON_NAME).read_text())
    assert saved["skipped"] == {"served bert": "time budget spent"}
    assert "- skipped `served bert`: time budget spent" in (tmp_path / REPORT_NAME).read_text()
