"""gpu.md from one goals run over two device calls: each goal judged on that run's own figures,
a fresh server's first load told apart, ratios shown finely enough that 0.895 does not pass for
0.90."""

from __future__ import annotations

import json
from pathlib import Path

from triton_kit.benchmarks.gpu import goals_report


def _aoti(best: float, prefix: str, concurrency: int, rates: dict[str, list[float]],
          bs1: float, c1: float, way: str = "cuda") -> dict:  # fmt: skip
    served = {f"{prefix}_i1_d0_c1": {"items_per_s": 400.0, "p50": c1, "p95": c1, "p99": c1}}
    for model, each in rates.items():
        for repeat, rate in enumerate(each, 1):
            key = f"{model}_c{concurrency}_{way}_shm" + (f"_rep{repeat}" if repeat > 1 else "")
            served[key] = {"items_per_s": rate, "p50": 10.0, "p95": 11.0, "p99": 12.0}
            slower = key.replace(f"_{way}_shm", "_cuda_shm" if way == "system" else "")
            served[slower] = {"items_per_s": rate * 0.8, "p50": 12.0, "p95": 13.0, "p99": 14.0}
    return {
        "env": {},
        "in_process": {
            "bs1": {"items_per_s": 500.0, "p50": bs1, "p95": bs1, "p99": bs1},
            "bs64": {"items_per_s": best, "p50": 4.0, "p95": 4.0, "p99": 4.0},
        },
        "served": served,
    }


def _run(root: Path) -> goals_report.Calls:
    files = {
        "resnet50/aoti.json": _aoti(20_000, "aoti", 256,
                                    {"aoti_i4_d2000p": [16_600, 18_200, 18_400],
                                     "aoti_i4_d2000p_g32": [15_000, 15_100]}, 1.9, 2.0),
        "bert-base/aoti-bert-base.json": _aoti(15_000, "bert_base_aoti", 64,
                                               {"bert_base_aoti_i4_d2000p": [12_900, 13_000]},
                                               2.4, 2.3, way="system"),
        "bert-large/aoti-bert-large.json": _aoti(5_000, "bert_large_aoti", 64,
                                                 {"bert_large_aoti_i2_d2000p": [4_500, 4_475]},
                                                 3.0, 3.5),
        "pipelines/pipelines.json": {
            "env": {"gpu": "H100", "date": "2026-11-27 18:24 UTC", "commit": "abc1234"},
            "served resnet50": {"c1": {"items_per_s": 80.0}, "c256": {"items_per_s": 2_000.0}},
            "in-process resnet50": {"max_batch": 256, "bs256": {"items_per_s": 900.0}},
            "served bert": {"c64": {"items_per_s": 700.0}},
            "in-process bert": {"max_batch": 32, "bs32": {"items_per_s": 1_000.0}},
        },
        "launcher/serving.json": {"launcher": {
            "model": "native_i4_d2000p", "concurrency": 256, "launcher_over_bare": 1.07,
            "median_items_per_s": {"bare": 9_000.0, "launcher": 9_630.0},
            "runs": {"bare": [{"items_per_s": 9_000.0, "p50": 18.0, "p99": 120.0}],
                     "launcher": [{"items_per_s": 9_630.0, "p50": 18.5, "p99": 118.0}]},
        }},
    }  # fmt: skip
    first, second = root / "call1", root / "call2"
    for name, data in files.items():
        call = second if name.startswith(("pipelines", "launcher")) else first
        (call / name).parent.mkdir(parents=True, exist_ok=True)
        (call / name).write_text(json.dumps(data))
    (first / "env.json").write_text(
        json.dumps({"date": "2026-11-27 18:10 UTC", "gpu": "H100", "commit": "abc1234"})
    )
    (first / "run.log").write_text("[goals 18:10:46] resnet50: python3 -m ...\n"
                                   "[goals 18:14:44] resnet50: exit 0\n"
                                   "[goals 18:27:56] pytest: exit 0\n")  # fmt: skip
    (second / "run.log").write_text("[goals 18:40:00] pipelines: exit 0\n[goals 18:42:00] done\n")
    (first / "pytest").mkdir()
    (first / "pytest" / "run.log").write_text("7 passed, 20 warnings in 79.15s\n")
    return goals_report.Calls((first, second))


def test_each_goal_is_judged_on_this_runs_figures(tmp_path: Path) -> None:
    text = goals_report.render(_run(tmp_path), "bash goals", "raw/call32")
    rows = {ln.split(" | ")[0]: ln for ln in text.splitlines() if ln.startswith("| ")}
    resnet = rows["| ResNet-50 c256 ≥ 0.9× in process"]
    assert "0.830×, 0.910×, 0.920×" in resnet and resnet.endswith("| after the first load |")
    assert "gather" not in resnet  # the better config (by median) is the one without
    assert rows["| ResNet-50 c256 ≥ 15,000 img/s"].endswith("16,600, 18,200, 18,400 | yes |")
    base = rows["| BERT-base c64 ≥ 0.85× in process"]
    assert "0.860×, 0.867×" in base and "system shm" in base and base.endswith("| yes |")
    # each way of sending the inputs is a config of its own: the slower way is not mixed in
    assert "0.688×" not in base
    large = rows["| BERT-large c64 ≥ 0.9× in process"]
    assert "0.900×, 0.895×" in large and large.endswith("| no |")
    batch = rows["| batch 1: ≤ 0.3 ms added p50"]
    assert "ResNet-50 +0.100 ms, BERT-base -0.100 ms, BERT-large +0.500 ms" in batch
    assert batch.endswith("| 2 of 3 |")
    assert rows["| `resnet50` (JPEG ensemble) ≥ 0.8×"].endswith(
        "2.22× (2,000 against 900 items/s) | yes |"
    )
    assert rows["| `bert` (text) ≥ 0.8×"].endswith("| no |")  # 0.70
    launcher = rows["| launcher ≥ 0.97× bare `tritonserver` (GPU)"]
    assert "medians of 1 alternating round each" in launcher and launcher.endswith("| yes |")
    call_one = "| call 1 | 2026-11-27 18:10:46–18:27:56 UTC at `abc1234` on H100: resnet50, pytest"
    assert call_one in text
    assert "| call 2 | ? 18:40:00–18:42:00 UTC: pipelines |" in text
    assert "| tests there | `tests/integration/server/test_aoti_backend.py`: 7 passed" in text


def test_a_step_the_run_lacks_is_not_measured_and_notes_get_their_heading(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run.step("launcher") / "serving.json").unlink()
    (run.step("bert-large") / "aoti-bert-large.json").unlink()
    text = goals_report.render(run, "bash goals", "", notes="The reading.")
    assert "| BERT-large c64 ≥ 0.9× in process | not measured | no |" in text
    assert "| launcher ≥ 0.97× bare `tritonserver` (GPU) | not measured | no |" in text
    assert "## BERT-large, seq 128\n\nNot measured in this run." in text
    assert text.endswith("## Reading the figures\n\nThe reading.\n")


def test_a_step_two_calls_ran_is_read_from_the_later_one(tmp_path: Path) -> None:
    run = _run(tmp_path)
    again = run.folders[1] / "bert-large"
    again.mkdir()
    data = json.loads((run.folders[0] / "bert-large" / "aoti-bert-large.json").read_text())
    data["served"] = {k: {**v, "items_per_s": v["items_per_s"] * 1.02}
                      for k, v in data["served"].items()}  # fmt: skip
    (again / "aoti-bert-large.json").write_text(json.dumps(data))
    assert run.step("bert-large") == again
    assert "| BERT-large c64 ≥ 0.9× in process | 0.918×, 0.913×" in goals_report.render(run, "", "")


def test_an_async_clients_loads_are_a_config_of_their_own(tmp_path: Path) -> None:
    run = _run(tmp_path)
    path = run.step("bert-large") / "aoti-bert-large.json"
    data = json.loads(path.read_text())
    for repeat, rate in enumerate([4_800, 4_750], 1):
        key = "bert_large_aoti_i2_d2000p_c64_cuda_shm_async" + (f"_rep{repeat}" * (repeat > 1))
        data["served"][key] = {"items_per_s": rate, "p50": 9.0, "p95": 9.5, "p99": 10.0}
    path.write_text(json.dumps(data))
    large = next(ln for ln in goals_report.render(run, "", "").splitlines()
                 if ln.startswith("| BERT-large c64"))  # fmt: skip
    assert "0.960×, 0.950×" in large and "CUDA shm, async client" in large
    assert large.endswith("| yes |")


def test_a_launcher_step_stopped_at_the_deadline_is_judged_on_its_complete_rounds(
    tmp_path: Path,
) -> None:
    """The call's deadline stopped the launcher step during its third round: no serving.json,
    but the log holds every finished row. Only complete rounds (a bare and a launcher row
    each) count, and the report says the step was cut short."""
    run = _run(tmp_path)
    folder = run.step("launcher")
    (folder / "serving.json").unlink()
    (folder / "perf_analyzer-native_i4_d2000p-c256.csv").write_text("")
    rows = [("bare", 10_000.0), ("launcher", 10_100.0), ("bare", 9_800.0),
            ("launcher", 9_900.0), ("bare", 20_000.0)]  # fmt: skip
    (folder / "run.log").write_text("== launcher (11 s)\n" + "".join(
        f'{kind} {{"items_per_s": {rate}, "p50": 18.0, "p95": 90.0, "p99": 110.0}}\n'
        for kind, rate in rows
    ))  # fmt: skip
    text = goals_report.render(run, "", "")
    launcher = next(ln for ln in text.splitlines() if ln.startswith("| launcher ≥"))
    assert "1.01 (10,000 against 9,900 img/s, medians of 2 alternating rounds each" in launcher
    assert "stopped before it wrote its JSON" in launcher and launcher.endswith("| yes |")
    assert "`native_i4_d2000p`" in text and "c256" in text
    assert "| bare | 3 |" not in text  # the unfinished round is not a row of the table


def test_main_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "gpu.md"
    calls = [str(folder) for folder in _run(tmp_path / "run").folders]
    assert goals_report.main([*calls, "--out", str(out)]) == 0
    assert out.read_text().startswith("# Issue 30's goals on the H100, in one run\n")


def test_a_family_step_stopped_at_the_deadline_is_judged_on_the_rows_its_log_holds(
    tmp_path: Path,
) -> None:
    """benchmarks.gpu.aoti writes its served rows into the JSON only when the whole served step
    ends; a call's deadline that stops it leaves them in its log alone (session 43, calls 1 and
    3). The report reads them from there, as aoti.report --log does, and says the step was cut
    short, instead of calling the family not measured."""
    run = _run(tmp_path)
    folder = run.step("resnet50")
    data = json.loads((folder / "aoti.json").read_text())
    served = data.pop("served")
    (folder / "aoti.json").write_text(json.dumps(data))
    (folder / "run.log").write_text("== served (146 s)\n" + "".join(
        f"{key} {row!r}\n" for key, row in served.items()
    ))  # fmt: skip
    (run.folders[0] / "run.log").write_text("[goals 18:10:46] resnet50: python3 -m ...\n"
                                            "[goals 18:14:44] resnet50: exit 124\n")  # fmt: skip
    text = goals_report.render(run, "", "")
    resnet = next(ln for ln in text.splitlines() if ln.startswith("| ResNet-50 c256 ≥ 0.9×"))
    assert "0.830×, 0.910×, 0.920×" in resnet
    assert "| c256 CUDA shm (repeat 3) | 18,400 |" in text  # the family's own table has them
    assert "resnet50 (stopped at the call's deadline)" in text  # the call's header row


def test_each_calls_row_names_its_hosts_cpu_where_goals_sh_recorded_it(tmp_path: Path) -> None:
    """Each call may start a fresh machine, and the hosts' CPUs differ (session 43's built the
    same package in 117 s against session 42's 75 s): a call's row names its CPU."""
    run = _run(tmp_path)
    env = run.folders[0] / "env.json"
    env.write_text(json.dumps({**json.loads(env.read_text()), "cpu": "AMD EPYC 9454"}))
    calls = [ln for ln in goals_report.render(run, "", "").splitlines() if ln.startswith("| call")]
    assert "at `abc1234` on H100 with AMD EPYC 9454: resnet50" in calls[0]
    assert " on " not in calls[1]  # no env.json there: nothing is made up


def _batch_one_line(tmp_path: Path, bert_large_rows: dict) -> str:
    """The goals table's batch-1 row, BERT-large at 1.313 ms in process and 1.611 ms served
    behind the batcher, plus ``bert_large_rows``."""
    run = _run(tmp_path)
    path = run.step("bert-large") / "aoti-bert-large.json"
    data = json.loads(path.read_text())
    data["in_process"]["bs1"]["p50"] = 1.313
    data["served"]["bert_large_aoti_i1_d0_c1"]["p50"] = 1.611
    data["served"].update(bert_large_rows)
    path.write_text(json.dumps(data))
    return next(ln for ln in goals_report.render(run, "", "").splitlines()
                if ln.startswith("| batch 1"))  # fmt: skip


def test_the_batch_one_row_shows_what_decides_the_goal_and_grpcs_part(tmp_path: Path) -> None:
    """Session 43's BERT-large added 0.298 ms, shown as "+0.30 ms" and met: the row gives the
    figure to the 1 µs its verdict reads, and where a C API row (Triton inside perf_analyzer)
    was measured, gRPC's part of the gap."""
    capi = {"items_per_s": 660.0, "p50": 1.481, "p95": 1.58, "p99": 2.14}
    batch = _batch_one_line(tmp_path, {"bert_large_aoti_i1_d0_c1_capi": capi})
    assert ("ResNet-50 +0.100 ms, BERT-base -0.100 ms, BERT-large +0.298 ms "
            "(gRPC, whose part was 0.130)") in batch  # fmt: skip
    assert batch.endswith("| 3 of 3 |")


def test_the_batch_one_row_names_http_where_it_served_a_lone_request_fastest(
    tmp_path: Path,
) -> None:
    """``--c1-protocols grpc,http``: the part outside Triton is then HTTP's, and the row says
    what unary gRPC, the default way, added (session 48: the goal met over HTTP or one gRPC
    stream, two of three families missing it over unary gRPC)."""
    capi = {"items_per_s": 660.0, "p50": 1.481, "p95": 1.58, "p99": 2.14}
    http = {"items_per_s": 650.0, "p50": 1.561, "p95": 1.7, "p99": 2.0}
    batch = _batch_one_line(tmp_path, {"bert_large_aoti_i1_d0_c1_capi": capi,
                                       "bert_large_aoti_i1_d0_c1_http": http})  # fmt: skip
    assert "BERT-large +0.248 ms (HTTP, whose part was 0.080; unary gRPC +0.298)" in batch
    stream = {"items_per_s": 655.0, "p50": 1.541, "p95": 1.7, "p99": 2.0}
    rows = {"bert_large_aoti_i1_d0_c1_capi": capi, "bert_large_aoti_i1_d0_c1_http": http,
            "bert_large_aoti_i1_d0_c1_stream": stream}  # fmt: skip
    batch = _batch_one_line(tmp_path / "stream", rows)
    assert ("BERT-large +0.228 ms (a gRPC stream, whose part was 0.060; unary gRPC +0.298)"
            in batch)  # fmt: skip


def test_the_batch_one_row_says_when_the_fastest_model_had_no_batcher(tmp_path: Path) -> None:
    """``--c1-batcher on,off`` (the no-delay batcher's thread hop, BERT-large's gap at the
    goal): the goal reads the fastest way, so the row names a setting the build does not write."""
    direct = {"items_per_s": 640.0, "p50": 1.583, "p95": 1.7, "p99": 2.0}
    batch = _batch_one_line(tmp_path, {"bert_large_aoti_i1_d0_direct_c1": direct})
    assert "BERT-large +0.270 ms (no batcher)" in batch  # no C API row, no other protocol
    assert "ResNet-50 +0.100 ms," in batch  # behind the batcher: nothing added


def test_calls_on_different_gpus_are_named_each_on_its_own(tmp_path: Path) -> None:
    """A call that names no machine kind may start an H200 instead of an H100 (session 45's
    first call): the title, the machine row and each call's row say which GPU ran what,
    instead of calling the whole run the first call's."""
    run = _run(tmp_path)
    env = run.folders[0] / "env.json"
    env.write_text(json.dumps({**json.loads(env.read_text()), "gpu": "NVIDIA H100 80GB HBM3"}))
    (run.folders[1] / "env.json").write_text(json.dumps({"gpu": "NVIDIA H200", "cpu": "Xeon"}))
    lines = goals_report.render(run, "", "").splitlines()
    assert lines[0] == "# Issue 30's goals on the H100 and the H200 (calls on different GPUs)"
    machine = next(ln for ln in lines if ln.startswith("| machine |"))
    assert machine.startswith("| machine | NVIDIA H100 80GB HBM3, NVIDIA H200; Python")
    calls = [ln for ln in lines if ln.startswith("| call")]
    assert "at `abc1234` on NVIDIA H100 80GB HBM3: resnet50" in calls[0]
    assert " on NVIDIA H200 with Xeon: pipelines" in calls[1]


def test_a_goal_row_names_the_batches_its_loads_formed(tmp_path: Path) -> None:
    """What capped ResNet-50 at c256 was the batch its loads formed (54 rows at 2000 us, 64 at
    4000, session 46): a goal row gives each load's rows per execution where Triton's counts
    gave them, and says nothing where a run predates them."""
    run = _run(tmp_path)
    path = run.step("resnet50") / "aoti.json"
    data = json.loads(path.read_text())
    load = "aoti_i4_d2000p_c256_cuda_shm"
    for key, batch in ((load, 53.26), (f"{load}_rep2", 54.0), (f"{load}_rep3", 63.71)):
        data["served"][key]["server"] = {"queue_ms": 1.2, "rows_per_execution": batch}
    path.write_text(json.dumps(data))
    rows = {ln.split(" | ")[0]: ln for ln in goals_report.render(run, "", "").splitlines()
            if ln.startswith("| ")}  # fmt: skip
    assert (
        "CUDA shm; batches of 53.3, 54.0, 63.7 rows)" in rows["| ResNet-50 c256 ≥ 0.9× in process"]
    )
    assert "batches of" not in rows["| BERT-base c64 ≥ 0.85× in process"]
