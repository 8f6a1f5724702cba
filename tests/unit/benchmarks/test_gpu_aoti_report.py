"""The AOTInductor run's report: ratios against the run's own in-process best, batch-1 gap,
and rows a run cut short left only in its log."""

from __future__ import annotations

import json
from pathlib import Path

from triton_kit.benchmarks.gpu.aoti import report as aoti_report

RUN = {
    "env": {"family": "resnet50"},
    "build": {"build_s": 90.0, "cxx": "/usr/bin/g++"},
    "in_process": {
        "check": {"max_abs_diff": 0.1875, "top1_agreement": 1.0},
        "bs1": {"items_per_s": 800.0, "p50": 1.25, "p95": 1.5, "p99": 2.0},
        "bs256": {"items_per_s": 20000.0, "p50": 12.0, "p95": 12.5, "p99": 13.0},
    },
    "served": {
        "aoti_i1_d0_c1": {"items_per_s": 500.0, "p50": 2.0, "p95": 2.5, "p99": 3.0},
        "aoti_i4_d2000p_c256_system_shm": {
            "items_per_s": 18000.0, "p50": 13.0, "p95": 15.0, "p99": 17.0, "retried": True
        },
    },
}  # fmt: skip


def test_ratios_are_against_the_runs_own_best_and_the_batch_one_gap_is_given(
    tmp_path: Path,
) -> None:
    source = tmp_path / "aoti.json"
    source.write_text(json.dumps(RUN))
    out = tmp_path / "report.md"
    aoti_report.main([str(source), "--out", str(out), "--commit", "abc1234"])
    text = out.read_text()
    assert "| 4 inst., 2000 µs + preferred | c256 system shm | 18,000 | 0.90 |" in text
    assert "| r |" in text and "`abc1234`" in text
    assert "**+0.75 ms**" in text  # 2.00 served against 1.25 in process
    assert "| 1 inst., no delay | c1 inline | 500 | — |" in text


def test_rows_only_in_the_log_are_filled_in(tmp_path: Path) -> None:
    cut = {**RUN, "served": None}
    log = tmp_path / "run.log"
    log.write_text(
        "== served (120 s)\n"
        "aoti_i2_d2000p_pool1024_c256_cuda_shm {'items_per_s': 10000.0, 'p50': 12.0, "
        "'p95': 14.0, 'p99': 20.0, 'unsettled': True}\n"
        "noise that is not a row\n"
    )
    rows = aoti_report.served_rows(cut, log)
    assert list(rows) == ["aoti_i2_d2000p_pool1024_c256_cuda_shm"]
    text = aoti_report.render(cut, rows, {})
    assert (
        "| 2 inst., 2000 µs + preferred, pools 1024 MiB | c256 CUDA shm | 10,000 | 0.50 |" in text
    )
    assert "| u |" in text


def test_repeated_loads_are_rows_of_their_own() -> None:
    latency = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
    rows = {
        "aoti_i2_d2000p_c256_cuda_shm": {"items_per_s": 16000.0, **latency},
        "aoti_i2_d2000p_c256_cuda_shm_rep2": {"items_per_s": 12000.0, **latency},
    }
    text = aoti_report.render(RUN, rows, {})
    assert "| c256 CUDA shm | 16,000 | 0.80 |" in text
    assert "| c256 CUDA shm (repeat 2) | 12,000 | 0.60 |" in text


def test_the_graph_sizes_a_run_configured_are_listed() -> None:
    text = aoti_report.render({**RUN, "env": {"family": "resnet50", "graph_sizes": [1, 2, 4]}},
                              {}, {})  # fmt: skip
    assert "- CUDA graphs (the graphed rows): 3 sizes, 1, 2, 4." in text
    assert "CUDA graphs (the graphed rows)" not in aoti_report.render(RUN, {}, {})


def test_each_load_says_how_many_cores_the_client_and_the_server_kept_busy() -> None:
    latency = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
    rows = {
        "aoti_i4_d2000p_c256_cuda_shm": {"items_per_s": 18000.0, **latency, "retried": True,
                                         "cpu": {"client_cores": 3.94, "server_cores": 8.21}},
        "aoti_i1_d0_c1_capi": {"items_per_s": 2000.0, **latency,
                               "cpu": {"client_cores": 1.52}},
    }  # fmt: skip
    text = aoti_report.render(RUN, rows, {})
    assert "| r cores client 3.9, server 8.2 |" in text
    assert "| cores client 1.5 |" in text  # C API: the server is inside perf_analyzer
    assert "*cores*: the cores perf_analyzer and the server kept busy" in text
    assert "*cores*" not in aoti_report.render(RUN, RUN["served"], {})  # no row measured them


def test_a_batch_one_row_without_the_batcher_is_named_so_and_counts_for_the_gap() -> None:
    latency = {"p95": 2.0, "p99": 3.0}
    rows = {
        "aoti_i1_d0_cg_c1_cuda_shm": {"items_per_s": 1500.0, "p50": 0.66, **latency},
        "aoti_i1_d0_direct_cg_c1_cuda_shm": {"items_per_s": 1600.0, "p50": 0.61, **latency},
    }
    text = aoti_report.render(RUN, rows, {})
    assert "| 1 inst., no batcher, CUDA graphs | c1 CUDA shm | 1,600 |" in text
    assert "| 1 inst., no delay, CUDA graphs | c1 CUDA shm | 1,500 |" in text
    assert aoti_report.batch_one(RUN["in_process"], rows) == (0.61, 1.25)  # the fastest way


def test_a_cpu_run_is_not_titled_a_gpu_one() -> None:
    assert "natively on the GPU: resnet50" in aoti_report.render(RUN, {}, {})  # no device: GPU
    cpu = {**RUN, "env": {"family": "bert-base", "device": "cpu"}}
    assert aoti_report.render(cpu, {}, {}).startswith(
        "# AOTInductor package served natively on the CPU: bert-base"
    )


def test_a_reused_package_says_it_was_built_before_the_run() -> None:
    reused = {**RUN, "build": {**RUN["build"], "reused": True}}
    text = aoti_report.render(reused, {}, {})
    assert (
        "- Build: 90.0 s (`aoti_compile_and_package`, compiler `/usr/bin/g++`, before this "
        "run, beside the call's other packages)." in text
    )
    assert "before this run" not in aoti_report.render(RUN, {}, {})


def test_a_c_api_row_splits_the_batch_one_gap_but_is_not_a_served_row() -> None:
    """Triton inside perf_analyzer (no gRPC) is faster than any served row, but the goal is the
    served latency: it is reported beside the gap, not as it."""
    rows = {
        **RUN["served"],
        "aoti_i1_d0_c1_capi": {"items_per_s": 700.0, "p50": 1.5, "p95": 1.6, "p99": 1.7},
    }
    text = aoti_report.render(RUN, rows, {})
    assert "| 1 inst., no delay | c1 inline, C API (Triton in perf_analyzer) | 700 | — |" in text
    assert "**+0.75 ms**" in text  # 2.00 served, not the 1.50 inside perf_analyzer
    assert "no protocol): 1.50 ms (+0.25), so gRPC's part is 0.50 ms." in text


def test_async_client_loads_are_named_so() -> None:
    latency = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
    rows = {"aoti_i4_d2000p_c256_cuda_shm_async_rep2": {"items_per_s": 19000.0, **latency}}
    text = aoti_report.render(RUN, rows, {})
    row = "| 4 inst., 2000 µs + preferred | c256 CUDA shm, async client (repeat 2) | 19,000 |"
    assert row in text


def test_warm_rows_load_times_and_first_calls_are_reported(tmp_path: Path) -> None:
    latency = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
    data = {
        **RUN,
        "first_calls": {"first_ms": [120.0, 110.0], "second_ms": [2.0, 2.5],
                        "first_total_s": 0.23, "second_total_s": 0.0, "excess_p50_ms": 118.0,
                        "excess_max_ms": 118.0},
    }  # fmt: skip
    log = tmp_path / "run.log"
    log.write_text("aoti_i4_d2000p_warm_load {'seconds': 95.5}\n")
    rows = aoti_report.served_rows(
        {**data, "served": {"aoti_i4_d2000p_warm_c256_cuda_shm": {"items_per_s": 19000.0,
                                                                    **latency}}},
        log,
    )  # fmt: skip
    text = aoti_report.render(data, rows, {})
    warm = "| 4 inst., 2000 µs + preferred, warm-up at every batch size | c256 CUDA shm | 19,000 |"
    assert warm in text
    assert "warm-up at every batch size 95.5 s" in text
    assert "batch sizes 1..2 ascending" in text and "median 118.0 ms" in text


def test_the_server_split_is_shown_and_misordered_statistics_are_called_unusable() -> None:
    rows = {
        "aoti_i4_d2000p_g32_c256_cuda_shm": {
            "items_per_s": 19000.0, "p50": 13.0, "p95": 15.0, "p99": 17.0,
            "server": {"queue_ms": 1.2, "compute_input_ms": 0.4, "compute_infer_ms": 11.5,
                       "compute_output_ms": 0.9},
        },
        "aoti_i4_d2000p_c256_cuda_shm": {
            "items_per_s": 18000.0, "p50": 13.0, "p95": 15.0, "p99": 17.0,
            "server": {"queue_ms": 1.2, "compute_input_ms": 8.4, "compute_infer_ms": 6.5e9,
                       "compute_output_ms": 6.9},
        },
    }  # fmt: skip
    text = aoti_report.render(RUN, rows, {})
    assert (
        "| 4 inst., 2000 µs + preferred, gather kernel from 32 requests | c256 CUDA shm | 19,000 "
        "| 0.95 | 13.00 | 15.00 | 17.00 | 1.20 / 0.40 / 11.50 / 0.90 |" in text
    )
    assert "| 1.20 / 8.40 / unusable / 6.90 |" in text


def test_graph_rows_are_named_and_each_side_of_batch_one_is_its_fastest_way() -> None:
    """CUDA graphs on both sides: the in-process best and the batch-1 gap take the fastest row,
    graphed or not, so a graphed server is never flattered by a plain in-process figure."""
    run = json.loads(json.dumps(RUN))
    run["in_process"]["bs1_graph"] = {"items_per_s": 2000.0, "p50": 0.5, "p95": 0.6, "p99": 0.7}
    run["in_process"]["bs256_graph"] = {"items_per_s": 25000.0, "p50": 10.0, "p95": 10.5,
                                        "p99": 11.0}  # fmt: skip
    run["served"]["aoti_i1_d0_cg_c1"] = {"items_per_s": 1000.0, "p50": 0.8, "p95": 1.0, "p99": 1.2}
    run["served"]["aoti_i4_d2000p_cg_c256_system_shm"] = {
        "items_per_s": 22500.0, "p50": 11.0, "p95": 12.0, "p99": 13.0
    }  # fmt: skip
    text = aoti_report.render(run, run["served"], {})
    assert "| 1, CUDA graph | 2,000 | 0.50 |" in text
    assert "(bs256_graph, 25,000/s)" in text
    assert "| 4 inst., 2000 µs + preferred, CUDA graphs | c256 system shm | 22,500 | 0.90 |" in text
    assert "| 1 inst., no delay, CUDA graphs | c1 inline | 1,000 | — |" in text
    assert "**+0.30 ms**" in text  # 0.80 served (graphed) against 0.50 in process (graphed)
    assert aoti_report.batch_one(run["in_process"], run["served"]) == (0.8, 0.5)


def test_a_model_that_failed_to_load_is_reported_with_its_cause() -> None:
    """Goals call B's graphed ResNet-50 ran the GPU out of memory at load: the report had shown
    nothing for it, as if it had never been asked for."""
    error = "server not ready; see server-aoti_i4_d2000p_cg.log"
    rows = {**RUN["served"], "aoti_i4_d2000p_cg_error": error}
    text = aoti_report.render(RUN, rows, {})
    assert (
        "**Not served:** 4 inst., 2000 µs + preferred, CUDA graphs: server not ready; see "
        "server-aoti_i4_d2000p_cg.log." in text
    )
    assert "Not served" not in aoti_report.render(RUN, RUN["served"], {})


def test_a_row_without_preferred_sizes_is_named_so() -> None:
    assert aoti_report.describe("aoti_i4_d100") == "4 inst., 100 µs"
    assert aoti_report.describe("aoti_i4_d100p_cg") == "4 inst., 100 µs + preferred, CUDA graphs"
    assert aoti_report.describe("bert_base_aoti_i1_d0_cg") == "1 inst., no delay, CUDA graphs"


def test_each_load_says_how_many_rows_each_execution_carried() -> None:
    """The batch size a served load formed decides how near the engine's largest batch it can
    come (ResNet-50 c256 formed about 42 rows by Little's law in session 45)."""
    latency = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
    server = {"queue_ms": 1.5, "compute_input_ms": 1.4, "compute_infer_ms": 6.0,
              "compute_output_ms": 1.2}  # fmt: skip
    rows = {
        "aoti_i4_d2000p_c256_cuda_shm": {"items_per_s": 19660.0, **latency,
                                         "server": {**server, "rows_per_execution": 42.26},
                                         "cpu": {"client_cores": 2.2, "server_cores": 5.1}},
        "aoti_i4_d2000p_c256_cuda_shm_rep2": {"items_per_s": 19000.0, **latency,
                                              "server": server},
    }  # fmt: skip
    text = aoti_report.render(RUN, rows, {})
    assert "| cores client 2.2, server 5.1, batch 42.3 |" in text
    assert "*batch*: rows per execution" in text
    assert "*batch*" not in aoti_report.render(RUN, RUN["served"], {})  # no row counted them


def test_an_http_row_is_named_and_its_protocols_part_is_said_where_it_is_the_fastest() -> None:
    """The batch-1 gap reads the fastest served way, HTTP's rows too; the part outside Triton
    then is HTTP's, not gRPC's."""
    rows = {
        "aoti_i1_d0_c1_cuda_shm": {"items_per_s": 1300.0, "p50": 0.75, "p95": 0.9, "p99": 1.0},
        "aoti_i1_d0_c1_cuda_shm_http": {"items_per_s": 1400.0, "p50": 0.70, "p95": 0.8, "p99": 0.9},
        "aoti_i1_d0_c1_capi": {"items_per_s": 1600.0, "p50": 0.53, "p95": 0.6, "p99": 0.7},
    }
    run = {**RUN, "served": rows}
    assert aoti_report.batch_one(run["in_process"], rows) == (0.70, 1.25)
    assert aoti_report.batch_one_protocol(rows) == "HTTP"
    text = aoti_report.render(run, rows, {})
    assert "| 1 inst., no delay | c1 CUDA shm, HTTP | 1,400 | — |" in text
    assert "so HTTP's part is 0.17 ms" in text
    del rows["aoti_i1_d0_c1_cuda_shm_http"]
    assert aoti_report.batch_one_protocol(rows) == "gRPC"


def test_a_grpc_stream_row_is_named_and_read_back() -> None:
    """A c1 row over one gRPC stream (``_stream``) is a load of its own in the table, and the
    part outside Triton is the stream's where it is the fastest."""
    rows = {
        "aoti_i1_d0_c1_cuda_shm": {"items_per_s": 1300.0, "p50": 0.75, "p95": 0.9, "p99": 1.0},
        "aoti_i1_d0_c1_cuda_shm_stream": {"items_per_s": 1450.0, "p50": 0.68, "p95": 0.8, "p99": 1},
        "aoti_i1_d0_c1_capi": {"items_per_s": 1600.0, "p50": 0.53, "p95": 0.6, "p99": 0.7},
    }
    text = aoti_report.render({**RUN, "served": rows}, rows, {})
    assert "| 1 inst., no delay | c1 CUDA shm, gRPC stream | 1,450 | — |" in text
    assert aoti_report.batch_one_protocol(rows) == "a gRPC stream"
    assert "so a gRPC stream's part is 0.15 ms" in text
