"""The AOTInductor benchmark's pieces that need no GPU: the served config and the options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from triton_kit.benchmarks.gpu import aoti

RESNET = aoti.families(smoke=False)["resnet50"]
BERT_BASE = aoti.families(smoke=False)["bert-base"]


def _parsed(text: str) -> model_config_pb2.ModelConfig:
    config = model_config_pb2.ModelConfig()
    text_format.Parse(text, config)  # unknown fields fail: Triton would refuse them too
    return config


def _written(repo: Path, options: aoti.Options) -> list[str]:
    """The served models ``options`` asks for, written into ``repo`` around a stand-in
    package (its bytes are copied, never loaded)."""
    package = repo.parent / "package.pt2"
    package.write_bytes(b"package")
    return aoti.write_repository(repo, package, Path(), options.settings, options)


def test_gpu_config_serves_the_package_through_the_renamed_backend() -> None:
    config = _parsed(aoti.aoti_config(RESNET, "aoti_i2", 2, gpu=True))
    assert (config.backend, config.platform) == ("pytorch_aoti", "torch_aoti")
    assert config.max_batch_size == 256
    assert [(g.kind, g.count, list(g.gpus)) for g in config.instance_group] == [
        (model_config_pb2.ModelInstanceGroup.KIND_GPU, 2, [0])
    ]
    assert list(config.dynamic_batching.preferred_batch_size) == [64, 128, 256]
    assert config.dynamic_batching.max_queue_delay_microseconds == 2000
    # Pinned output stays on (Triton's default): the crash was the unbatched responder, not it.
    assert not config.HasField("optimization")
    assert [i.name for i in config.input] == ["INPUT__0"]
    assert [o.name for o in config.output] == ["OUTPUT__0"]


def test_cpu_config_has_no_gpu_list() -> None:
    (group,) = _parsed(aoti.aoti_config(RESNET, "aoti_i1", 1, gpu=False)).instance_group
    assert group.kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert list(group.gpus) == []


def test_backend_and_compiler_default_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRITON_KIT_AOTI_BACKEND", "/b/libtriton_pytorch_aoti.so")
    monkeypatch.setenv("TRITON_KIT_AOTI_CXX", "/usr/bin/g++")
    options = aoti.parse(["--out", str(tmp_path)])
    assert options.backend_lib == Path("/b/libtriton_pytorch_aoti.so")
    assert options.cxx == "/usr/bin/g++"
    assert options.instances == (1, 2, 4)
    assert options.settings.device == "cuda" and options.concurrency == 256


def test_smoke_runs_on_cpu_with_two_clients(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path), "--smoke", "--instances", "1"])
    assert options.settings.device == "cpu"
    assert options.concurrency == 2
    assert options.instances == (1,)


def test_shared_memory_loads_default_to_all_three_and_refuse_unknown_kinds(tmp_path: Path) -> None:
    assert aoti.parse(["--out", str(tmp_path)]).shared_memory == ("none", "system", "cuda")
    assert aoti.parse(["--out", str(tmp_path), "--shared-memory", "cuda"]).shared_memory == (
        "cuda",
    )
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--shared-memory", "nvlink"])


def test_batch_one_config_does_not_wait() -> None:
    batching = _parsed(
        aoti.aoti_config(RESNET, "aoti_i1_d0", 1, gpu=True, delay_us=0)
    ).dynamic_batching
    assert batching.max_queue_delay_microseconds == 0
    assert list(batching.preferred_batch_size) == []


def test_each_delay_is_served_at_every_instance_count_and_the_baseline_can_stay_out(
    tmp_path: Path,
) -> None:
    options = aoti.parse(
        ["--out", str(tmp_path), "--instances", "3,4", "--delays", "1000,4000", "--no-baseline"]
    )
    assert options.delays_us == (1000, 4000) and not options.baseline
    repo = tmp_path / "repo"
    names = _written(repo, options)
    assert names == [
        "aoti_i1_d0", "aoti_i3_d1000p", "aoti_i4_d1000p", "aoti_i3_d4000p", "aoti_i4_d4000p"
    ]  # fmt: skip
    config = _parsed((repo / "aoti_i4_d4000p" / "config.pbtxt").read_text())
    assert config.dynamic_batching.max_queue_delay_microseconds == 4000
    assert config.instance_group[0].count == 4
    assert (repo / "aoti_i1_d0" / "1" / "model.pt2").read_bytes() == b"package"


def test_delays_default_to_2000_and_refuse_zero(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path)])
    assert options.delays_us == (2000,) and options.baseline
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--delays", "0"])


def test_bert_config_takes_ids_and_mask_and_gives_the_embedding() -> None:
    config = _parsed(aoti.aoti_config(BERT_BASE, "bert_base_aoti_i2_d2000p", 2, gpu=True))
    assert (config.backend, config.platform) == ("pytorch_aoti", "torch_aoti")
    assert config.max_batch_size == 64
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [
        ("INPUT__0", model_config_pb2.TYPE_INT64, [128]),
        ("INPUT__1", model_config_pb2.TYPE_INT64, [128]),
    ]
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [
        ("OUTPUT__0", model_config_pb2.TYPE_FP32, [768])
    ]
    assert list(config.dynamic_batching.preferred_batch_size) == [16, 32, 64]
    large = aoti.families(smoke=False)["bert-large"]
    assert list(_parsed(aoti.aoti_config(large, "x", 1, gpu=True)).output[0].dims) == [1024]
    assert large.output_bytes == 1024 * 4


def test_bert_family_loads_at_c64_and_names_its_rows_and_report(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path), "--family", "bert-base", "--instances", "2"])
    assert options.family == "bert-base" and options.concurrency == 64
    assert options.spec.report == "aoti-bert-base.json"
    assert not options.with_baseline  # no TorchScript row for BERT, even without --no-baseline
    names = _written(tmp_path / "repo", options)
    assert names == ["bert_base_aoti_i1_d0", "bert_base_aoti_i2_d2000p"]
    assert aoti.parse(["--out", str(tmp_path)]).spec.report == "aoti.json"
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--family", "gpt2"])


def test_bert_input_data_sends_ids_within_the_vocabulary_and_full_masks(tmp_path: Path) -> None:
    path = BERT_BASE.input_data(tmp_path / "data.json")
    rows = json.loads(Path(path).read_text())["data"]
    assert len(rows) == 16
    for row in rows:
        assert set(row) == {"INPUT__0", "INPUT__1"}
        ids, mask = row["INPUT__0"], row["INPUT__1"]
        assert ids["shape"] == mask["shape"] == [128]
        assert all(0 <= t < aoti.BERT_VOCAB for t in ids["content"])
        assert set(mask["content"]) == {1}
    assert RESNET.input_data(tmp_path / "unused.json") == "random"


def test_bert_check_inputs_are_padded_but_never_empty() -> None:
    ids, mask = BERT_BASE.example(np.random.default_rng(0), 8)
    assert ids.shape == mask.shape == (8, 128) and ids.dtype == mask.dtype == np.int64
    assert ids.max() < aoti.BERT_VOCAB and mask[0].all()
    assert (mask.sum(1) >= 64).all() and (mask.sum(1) < 128).any()


def test_bert_vocabulary_is_the_models() -> None:
    pytest.importorskip("transformers")
    from triton_kit.benchmarks.gpu.settings import Settings

    net = BERT_BASE.make(Settings(out=Path("."), device="cpu", smoke=True))
    assert net.model.config.vocab_size == aoti.BERT_VOCAB


def test_memory_pools_default_to_tritons_own_and_size_both_pools(tmp_path: Path) -> None:
    assert aoti.parse(["--out", str(tmp_path)]).pools_mb == (0,)
    assert aoti.pool_flags(0) == []
    options = aoti.parse(["--out", str(tmp_path), "--pools-mb", "0,1024"])
    assert options.pools_mb == (0, 1024)
    assert aoti.pool_flags(1024) == [
        "--pinned-memory-pool-byte-size=1073741824",
        "--cuda-memory-pool-byte-size=0:1073741824",
    ]
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--pools-mb", "-1"])


def test_cores_and_repeats_are_options_and_each_batched_load_repeats(tmp_path: Path) -> None:
    default = aoti.parse(["--out", str(tmp_path)])
    assert (default.server_cpus, default.client_cpus, default.repeats) == (None, None, 1)
    cores = ["--server-cpus", "0-11", "--client-cpus", "12-15"]
    options = aoti.parse(["--out", str(tmp_path), *cores, "--repeats", "3"])
    assert (options.server_cpus, options.client_cpus, options.repeats) == ("0-11", "12-15", 3)
    assert aoti.repeated([(1, "none", "sync"), (256, "system", "async")], 3) == [
        (1, "none", "sync", 1), (256, "system", "async", 1), (256, "system", "async", 2),
        (256, "system", "async", 3)
    ]  # fmt: skip
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--repeats", "0"])


@pytest.fixture
def perf_analyzer_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines perf_analyzer.run would start (mocked: no server to measure here);
    each run then fails as if the server were absent."""
    from triton_kit.benchmarks.harness import perf_analyzer

    seen: list[list[str]] = []

    def fake_run(command: list[str], **_: object) -> object:
        seen.append(command)
        return type("Done", (), {"returncode": 1, "stdout": "", "stderr": "no server"})()

    monkeypatch.setattr(perf_analyzer, "binary", lambda: "/bin/perf_analyzer")
    monkeypatch.setattr(perf_analyzer.subprocess, "run", fake_run)
    return seen


def test_perf_analyzer_and_the_server_can_be_kept_on_their_own_cores(
    perf_analyzer_commands: list[list[str]], tmp_path: Path
) -> None:
    from triton_kit.benchmarks.harness import perf_analyzer

    seen = perf_analyzer_commands
    assert perf_analyzer.pinned(None) == []
    assert perf_analyzer.pinned("12-15") == ["taskset", "-c", "12-15"]
    row = perf_analyzer.run("127.0.0.1:1", "m", 4, 1.0, tmp_path, cpus="12-15")
    assert "error" in row
    assert seen[0][:4] == ["taskset", "-c", "12-15", "/bin/perf_analyzer"]


def test_batched_loads_can_come_from_perf_analyzers_async_client(
    perf_analyzer_commands: list[list[str]], tmp_path: Path
) -> None:
    """``--client sync,async``: each batched load from a blocking thread per request and from
    ``--async``, keyed so the report tells them apart; unknown modes are refused."""
    from triton_kit.benchmarks.harness import perf_analyzer

    assert aoti.parse(["--out", str(tmp_path)]).clients == ("sync",)
    options = aoti.parse(["--out", str(tmp_path), "--client", "sync,async"])
    assert options.clients == ("sync", "async")
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--client", "eager"])
    assert aoti.load_key("aoti_i4_d2000p", 256, "cuda", "async", 2) == (
        "aoti_i4_d2000p_c256_cuda_shm_async_rep2"
    )
    assert aoti.load_key("aoti_i1_d0", 1, "none", "sync", 1) == "aoti_i1_d0_c1"
    assert aoti.load_key("aoti_i1_d0_cg", 1, "none", "capi", 1) == "aoti_i1_d0_cg_c1_capi"
    assert not aoti.parse(["--out", str(tmp_path)]).c_api
    assert aoti.parse(["--out", str(tmp_path), "--c-api"]).c_api
    seen = perf_analyzer_commands
    perf_analyzer.run("127.0.0.1:1", "m", 4, 1.0, tmp_path)
    perf_analyzer.run("127.0.0.1:1", "m", 4, 1.0, tmp_path, asynchronous=True)
    assert "--async" not in seen[0]
    assert "--async" in seen[1]
    assert seen[1][seen[1].index("-f") + 1].endswith("-c4-async.csv")


@pytest.mark.parametrize("family", ["resnet50", "bert-base"])
def test_warm_config_runs_every_batch_size_once_on_zeros(family: str) -> None:
    spec = aoti.families(smoke=False)[family]
    config = _parsed(aoti.aoti_config(spec, "x_warm", 4, gpu=True, warmup=True))
    assert [w.batch_size for w in config.model_warmup] == list(range(spec.max_batch, 0, -1))
    for sample in config.model_warmup:
        assert sorted(sample.inputs) == [f"INPUT__{i}" for i in range(len(spec.inputs))]
        assert all(v.zero_data for v in sample.inputs.values())
    assert not _parsed(aoti.aoti_config(spec, "x", 4, gpu=True)).model_warmup


def test_warm_rows_are_models_of_their_own_beside_the_cold_ones(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path), "--smoke", "--instances", "2", "--warmup",
                          "none,all", "--no-baseline", "--first-calls"])  # fmt: skip
    assert options.warmups == ("none", "all") and options.first_calls
    package = tmp_path / "p.pt2"
    package.write_bytes(b"")
    names = aoti.write_repository(tmp_path / "repo", package, Path(), options.settings, options)
    assert names == ["aoti_i1_d0", "aoti_i2_d2000p", "aoti_i2_d2000p_warm"]
    warm = (tmp_path / "repo" / "aoti_i2_d2000p_warm" / "config.pbtxt").read_text()
    assert 'name: "aoti_i2_d2000p_warm"' in warm and "model_warmup" in warm
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--warmup", "some"])


def test_each_gather_threshold_is_its_own_model_with_the_parameter(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path), "--instances", "4", "--gather", "0,32",
                          "--no-baseline"])  # fmt: skip
    assert options.gathers == (0, 32)
    repo = tmp_path / "repo"
    names = _written(repo, options)
    assert names == ["aoti_i1_d0", "aoti_i4_d2000p", "aoti_i4_d2000p_g32"]
    gathered = _parsed((repo / "aoti_i4_d2000p_g32" / "config.pbtxt").read_text())
    assert gathered.parameters["GATHER_KERNEL_BUFFER_THRESHOLD"].string_value == "32"
    for name in ("aoti_i1_d0", "aoti_i4_d2000p"):
        assert not _parsed((repo / name / "config.pbtxt").read_text()).parameters
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--gather", "-1"])


def test_cuda_graph_rows_are_models_of_their_own_with_tritons_graphs_field(tmp_path: Path) -> None:
    options = aoti.parse(["--out", str(tmp_path), "--instances", "4", "--cuda-graphs", "off,on",
                          "--no-baseline"])  # fmt: skip
    assert options.graphs == (False, True)
    repo = tmp_path / "repo"
    names = _written(repo, options)
    assert names == ["aoti_i1_d0", "aoti_i1_d0_cg", "aoti_i4_d2000p", "aoti_i4_d2000p_cg"]
    for name in names:
        config = _parsed((repo / name / "config.pbtxt").read_text())
        assert config.optimization.cuda.graphs == name.endswith("_cg"), name
    graphed = _parsed((repo / "aoti_i4_d2000p_cg" / "config.pbtxt").read_text())
    sizes = [s.batch_size for s in graphed.optimization.cuda.graph_spec]
    assert sizes[:17] == [*range(1, 17), 18] and sizes[-3:] == [64, 128, 256]  # as the build
    # Captured at load: a zero-filled warm-up request at each size.
    assert [w.batch_size for w in graphed.model_warmup] == sizes[::-1]  # largest first
    # Both no-delay models are the batch-1 rows (c1 only); the others are loaded at c256.
    assert [aoti.batch_one_row(n) for n in names] == [True, True, False, False]
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--cuda-graphs", "maybe"])


def test_graph_sizes_can_be_an_eighth_apart_above_64_rows_and_the_run_records_them(
    tmp_path: Path,
) -> None:
    """``--fine-graphs-up-to 256``: ResNet-50's graphed rows at every size with at most an
    eighth padding (48 sizes), now that one capture stream per instance lets the graphs share
    their pool; the default stays the build's (powers of two above 64)."""
    assert aoti.parse(["--out", str(tmp_path)]).graph_sizes[-3:] == (64, 128, 256)
    options = aoti.parse(["--out", str(tmp_path), "--instances", "4", "--cuda-graphs", "on",
                          "--no-baseline", "--fine-graphs-up-to", "256"])  # fmt: skip
    repo = tmp_path / "repo"
    _written(repo, options)
    graphed = _parsed((repo / "aoti_i4_d2000p_cg" / "config.pbtxt").read_text())
    sizes = [s.batch_size for s in graphed.optimization.cuda.graph_spec]
    assert sizes == list(options.graph_sizes) and len(sizes) == 48
    assert sizes[-9:] == [128, 144, 160, 176, 192, 208, 224, 240, 256]
    assert [w.batch_size for w in graphed.model_warmup] == sizes[::-1]
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--fine-graphs-up-to", "0"])


def test_batched_rows_can_go_without_preferred_sizes(tmp_path: Path) -> None:
    """With graphs at most an eighth apart, a batch no longer needs to wait for a preferred
    size: ``--preferred on,off`` serves each batched row both ways (``_d100p`` and ``_d100``)."""
    options = aoti.parse(["--out", str(tmp_path), "--instances", "4", "--delays", "100",
                          "--preferred", "on,off", "--no-baseline"])  # fmt: skip
    names = _written(tmp_path / "repo", options)
    assert names == ["aoti_i1_d0", "aoti_i4_d100p", "aoti_i4_d100"]
    with_sizes = _parsed((tmp_path / "repo" / "aoti_i4_d100p" / "config.pbtxt").read_text())
    without = _parsed((tmp_path / "repo" / "aoti_i4_d100" / "config.pbtxt").read_text())
    assert list(with_sizes.dynamic_batching.preferred_batch_size) == [64, 128, 256]
    assert not without.dynamic_batching.preferred_batch_size
    assert without.dynamic_batching.max_queue_delay_microseconds == 100
    assert aoti.parse(["--out", str(tmp_path)]).preferred == (True,)
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--preferred", "sometimes"])


def test_the_batch_one_rows_can_be_limited_to_the_ways_the_goal_reads(tmp_path: Path) -> None:
    """Each c1 row is a stability-checked perf_analyzer run of up to half a minute: the BERT-base
    c1 server took 127 s of a 570 s device call for its four rows (session 43). The batch-1 goal
    reads the fastest way (CUDA shm) and the C API row, so ``--c1-shared-memory cuda`` leaves the
    others out; by default every way is measured, CUDA shm only where there is a GPU."""
    default = aoti.parse(["--out", str(tmp_path)])
    assert aoti.planned_loads("aoti_i1_d0_cg", default, c1=False) == [
        (1, "none", "sync"), (1, "system", "sync"), (1, "cuda", "sync")
    ]  # fmt: skip
    smoke = aoti.parse(["--out", str(tmp_path), "--smoke"])
    assert aoti.planned_loads("aoti_i1_d0", smoke, c1=False) == [
        (1, "none", "sync"), (1, "system", "sync")
    ]  # fmt: skip
    cuda = aoti.parse(["--out", str(tmp_path), "--c1-shared-memory", "cuda", "--client",
                       "sync,async", "--shared-memory", "system"])  # fmt: skip
    assert aoti.planned_loads("aoti_i1_d0_cg", cuda, c1=False) == [(1, "cuda", "sync")]
    assert aoti.planned_loads("aoti_i4_d2000p", cuda, c1=False) == [
        (256, "system", "sync"), (256, "system", "async")
    ]  # fmt: skip
    assert aoti.planned_loads("native_i4_d2000p", cuda, c1=True)[-1] == (1, "none", "sync")
    for wrong in (["--c1-shared-memory", "pinned"], ["--smoke", "--c1-shared-memory", "cuda"]):
        with pytest.raises(SystemExit):
            aoti.parse(["--out", str(tmp_path), *wrong])


def test_the_batch_one_model_can_go_without_the_batcher(tmp_path: Path) -> None:
    """``--c1-batcher on,off``: the no-delay model behind the dynamic batcher and without
    ``dynamic_batching`` (``_direct``: Triton's default scheduler, each request straight to the
    instance); the batched rows keep theirs, and the direct one is still a batch-1 row."""
    assert aoti.parse(["--out", str(tmp_path)]).c1_batcher == (True,)
    options = aoti.parse(["--out", str(tmp_path), "--c1-batcher", "on,off", "--instances", "4",
                          "--cuda-graphs", "on", "--no-baseline"])  # fmt: skip
    names = _written(tmp_path / "repo", options)
    assert names == ["aoti_i1_d0_cg", "aoti_i1_d0_direct_cg", "aoti_i4_d2000p_cg"]
    configs = {n: _parsed((tmp_path / "repo" / n / "config.pbtxt").read_text()) for n in names}
    assert not configs["aoti_i1_d0_direct_cg"].HasField("dynamic_batching")
    assert configs["aoti_i1_d0_direct_cg"].optimization.cuda.graphs
    assert configs["aoti_i1_d0_cg"].HasField("dynamic_batching")
    assert configs["aoti_i4_d2000p_cg"].dynamic_batching.max_queue_delay_microseconds == 2000
    assert aoti.batch_one_row("aoti_i1_d0_direct_cg") and not aoti.batch_one_row(names[2])
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--c1-batcher", "maybe"])


def test_the_batch_one_models_can_take_graphs_apart_from_the_batched_ones(tmp_path: Path) -> None:
    """``--c1-cuda-graphs on``: a lone request without graphs never came near one with them
    (ResNet-50 1.83 against 0.71 ms p50, session 45), and its two stability-checked loads cost
    about two minutes of a call the deadline cut short; the batched rows keep
    ``--cuda-graphs``'s choice, and in process each batch is replayed from a graph as well."""
    assert aoti.parse(["--out", str(tmp_path), "--cuda-graphs", "off,on"]).c1_graphs == (
        False, True
    )  # fmt: skip
    graphs = ["--cuda-graphs", "off,on", "--c1-cuda-graphs", "on", "--c1-batcher", "off"]
    options = aoti.parse(["--out", str(tmp_path), *graphs, "--instances", "4", "--no-baseline"])
    assert options.graphs == (False, True) and options.c1_graphs == (True,)
    names = _written(tmp_path / "repo", options)
    assert names == ["aoti_i1_d0_direct_cg", "aoti_i4_d2000p", "aoti_i4_d2000p_cg"]
    batched_off = aoti.parse(["--out", str(tmp_path), "--c1-cuda-graphs", "on"])
    assert batched_off.graphs == (False,) and batched_off.graphed_anywhere
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--c1-cuda-graphs", "maybe"])


def test_the_batch_one_rows_can_go_over_http_too(tmp_path: Path) -> None:
    """``--c1-protocols grpc,http``: a lone request's served latency is mostly the protocol's
    (session 47 on the H200: gRPC and the client 0.21-0.26 ms of a +0.31 to +0.39 ms gap, Triton
    0.09-0.15), and HTTP's c1 read 0.02-0.09 ms below gRPC's on CPU
    (benchmarks/results/batch_one_protocol_cpu.md): each c1 way once per protocol, keyed
    ``_http``; the batched loads stay on gRPC; unknown protocols are refused."""
    assert aoti.parse(["--out", str(tmp_path)]).c1_protocols == ("grpc",)
    options = aoti.parse(["--out", str(tmp_path), "--c1-protocols", "grpc,http",
                          "--c1-shared-memory", "cuda", "--shared-memory", "system"])  # fmt: skip
    assert options.c1_protocols == ("grpc", "http")
    assert aoti.planned_loads("aoti_i1_d0_cg", options, c1=False) == [
        (1, "cuda", "sync"), (1, "cuda", "http")
    ]  # fmt: skip
    assert aoti.planned_loads("aoti_i4_d2000p", options, c1=False) == [(256, "system", "sync")]
    assert aoti.load_key("aoti_i1_d0_cg", 1, "cuda", "http", 1) == "aoti_i1_d0_cg_c1_cuda_shm_http"
    with pytest.raises(SystemExit):
        aoti.parse(["--out", str(tmp_path), "--c1-protocols", "grpc,quic"])


def test_the_batch_one_rows_can_go_over_a_grpc_stream(tmp_path: Path) -> None:
    """``--c1-protocols grpc-stream``: perf_analyzer's ``--streaming``, each request on one
    long-lived bidirectional gRPC stream instead of an RPC of its own (gRPC's performance guide:
    a stream skips each call's setup). On the H200 its c1 p50 read 0.08-0.10 ms below unary
    gRPC's (benchmarks/results/gpu.md, session 48). Keyed ``_stream``."""
    options = aoti.parse(["--out", str(tmp_path), "--c1-protocols", "grpc,http,grpc-stream",
                          "--c1-shared-memory", "cuda"])  # fmt: skip
    assert options.c1_protocols == ("grpc", "http", "grpc-stream")
    assert aoti.planned_loads("aoti_i1_d0_cg", options, c1=False) == [
        (1, "cuda", "sync"), (1, "cuda", "http"), (1, "cuda", "stream")
    ]  # fmt: skip
    assert (aoti.load_key("aoti_i1_d0_cg", 1, "cuda", "stream", 1)
            == "aoti_i1_d0_cg_c1_cuda_shm_stream")  # fmt: skip
