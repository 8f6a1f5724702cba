"""The python ``pytorch`` backend's own code, driven without Triton (fast: mutation runs).

Tiny TorchScript modules are scripted here (``y = x * 2 + b`` and the row sums of ``x``;
identity and doubling models for the config dtypes); expected outputs are hand-worked
numbers or numpy. The model object is set up as ``initialize`` would set it up from
config.pbtxt, without the python stub (as tests/unit/server/test_onnxruntime_backend.py does),
except in the
device test, which calls ``initialize`` itself with a config that needs no stub call.
The GPU graph path's bookkeeping runs on CPU through ``CudaGraph``'s CPU mode; capturing
real graphs, ``cuda:<id>`` and pinned copies are the GPU tests' job
(tests/integration/server/test_pytorch_backend.py on the lent H100).
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from triton_kit.python_models.common.base import ExecuteProfile, InvalidInput
from triton_kit.python_models.common.cuda_graphs import CudaGraph, graph_key
from triton_kit.python_models.common.parameters import ModelParameters
from triton_kit.python_models.common.torchscript import TorchScriptModel as TritonPythonModel


class _Affine(torch.nn.Module):
    """(x * 2 + b, row sums of x); zeros while in training mode (``eval()`` must be called)."""

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.training:
            return torch.zeros_like(x), torch.zeros(x.shape[0])
        return x * 2 + b, x.sum(dim=1)


class _Double(torch.nn.Module):
    """x + x in x's own dtype: one output, not a tuple."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + x


def _save(path: Path, module: torch.nn.Module) -> None:
    torch.jit.script(module).save(str(path))  # saved in training mode (nn.Module's default)


def _config(inputs: dict[str, str], outputs: tuple[str, ...] = ("Y", "S")) -> dict:
    return {
        "max_batch_size": 8,
        "input": [{"name": n, "data_type": t, "dims": ["-1"]} for n, t in inputs.items()],
        "output": [{"name": n, "data_type": "TYPE_FP32", "dims": ["-1"]} for n in outputs],
    }


def _model(version_dir: Path, config: dict, device: str = "cpu") -> TritonPythonModel:
    model = TritonPythonModel()
    model.device = torch.device(device)
    model.model_config = config
    model.model_name = "toy"
    model.version_dir = version_dir
    model.params = ModelParameters({})
    model.max_batch_size = int(config["max_batch_size"])
    model.input_names = [spec["name"] for spec in config["input"]]
    model.optional_inputs = set()
    model.output_dtypes = {spec["name"]: np.dtype(np.float32) for spec in config["output"]}
    model.profile = None
    model.setup()
    return model


@pytest.fixture
def affine(tmp_path: Path) -> TritonPythonModel:
    _save(tmp_path / "model.pt", _Affine())
    return _model(tmp_path, _config({"X": "TYPE_FP32", "B": "TYPE_FP32"}))


@pytest.fixture
def cudnn_benchmark_on() -> Iterator[None]:
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    yield
    torch.backends.cudnn.benchmark = before


def _request(x: list, b: list) -> dict[str, np.ndarray]:
    return {"X": np.array(x, dtype=np.float32), "B": np.array(b, dtype=np.float32)}


def test_setup_reads_the_config(tmp_path: Path, cudnn_benchmark_on: None) -> None:
    _save(tmp_path / "model.pt", _Affine())
    model = _model(tmp_path, _config({"X": "TYPE_FP16", "B": "TYPE_INT64"}))
    assert model.input_dtypes == {"X": torch.float16, "B": torch.int64}
    assert model.output_names == ["Y", "S"]
    assert model.graphs == {}
    assert model.module.training is False
    assert torch.backends.cudnn.benchmark is False


def test_default_model_filename(tmp_path: Path) -> None:
    _save(tmp_path / "other.pt", _Affine())
    config = _config({"X": "TYPE_FP32", "B": "TYPE_FP32"})
    model = _model(tmp_path, {**config, "default_model_filename": "other.pt"})
    assert model.process_batch([_request([[1, 2]], [[0, 1]])])[0]["S"].tolist() == [3.0]
    # As a python model, Triton fills default_model_filename with the model.py it runs.
    with pytest.raises(FileNotFoundError) as caught:
        _model(tmp_path, {**config, "default_model_filename": "model.py"})
    assert str(caught.value) == (
        f"{tmp_path / 'model.pt'} not found; build it with `python -m triton_kit.build_engines`"
    )
    _save(tmp_path / "model.pt", _Double())
    assert _model(tmp_path, {**config, "default_model_filename": ""}).module.training is False


def _where_cuda_can_start(check, *args: object, cpu_twin=None) -> None:
    """``check(*args)`` here, or in a fresh (spawned) process where CUDA is present: CUDA
    cannot start in a forked child of a process that started it, as mutmut forks one child
    per mutant after its own test run (on the H100 every mutant then 'died' of that error,
    the equivalent ones too: 128 of 128). ``cpu_twin()`` first runs the same functions on
    the CPU here: mutmut maps tests to the functions they reach in this process only, and
    would not run this test for mutants of functions reached only in the spawned one."""
    if not torch.cuda.is_available():
        check(*args)
        return
    if cpu_twin is not None:
        cpu_twin()
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(_plainly_failing, (check, *args))


def _plainly_failing(check, *args: object) -> None:
    """Run ``check``; any failure comes back as an AssertionError with its traceback: some
    exceptions (pytest's own outcomes) do not unpickle, and the pool then waits forever."""
    try:
        check(*args)
    except BaseException:
        raise AssertionError(traceback.format_exc()) from None


@pytest.mark.parametrize("kind", ["GPU", "CPU"])
def test_initialize_picks_the_device(tmp_path: Path, kind: str) -> None:
    # KIND_GPU without CUDA (this machine) falls back to the CPU; CUDA is the H100's job.
    (tmp_path / "cpu").mkdir()
    twin = partial(_initialize_picks_the_device, str(tmp_path / "cpu"), "CPU")
    _where_cuda_can_start(_initialize_picks_the_device, str(tmp_path), kind, cpu_twin=twin)


def _initialize_picks_the_device(directory: str, kind: str) -> None:
    # No stub here, so the stub's numpy<2 guard (test_server_environment.py) is set aside:
    # the H100's own Python, which runs this test there, has numpy 2.5.
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr("triton_kit.python_models.common.base.require_numpy_1", lambda: None)
        model = _initialized(Path(directory), kind)
    expected = "cuda:0" if kind == "GPU" and torch.cuda.is_available() else "cpu"
    assert model.device == torch.device(expected)
    assert model.input_names == ["X"] and model.input_dtypes == {"X": torch.int32}
    model.output_names = ["Y"]
    (result,) = model.process_batch([{"X": np.array([[3, -4]], dtype=np.int32)}])
    assert result["Y"].tolist() == [[6.0, -8.0]]


def _initialized(tmp_path: Path, kind: str, device_id: str | None = "0") -> TritonPythonModel:
    (tmp_path / "1").mkdir(parents=True)
    _save(tmp_path / "1" / "model.pt", _Double())
    config = {"max_batch_size": 4, "input": [{"name": "X", "data_type": "TYPE_INT32"}]}
    model = TritonPythonModel()
    args = {
        "model_config": json.dumps(config),  # no outputs: their dtypes need the stub
        "model_name": "double",
        "model_repository": str(tmp_path),
        "model_version": "1",
        "model_instance_kind": kind,
    }
    model.initialize(args if device_id is None else {**args, "model_instance_device_id": device_id})
    return model


# x + x after the cast to the config's dtype, worked by hand: 0.1 is 0.0999755859375 in FP16
# and 0.100000001490116 in FP32; 200 + 200 wraps to 144 in UINT8, 100 + 100 to -56 in INT8,
# 2**30 + 2**30 to -2**31 in INT32 (not in INT64); True + True stays True (1) in BOOL.
@pytest.mark.parametrize(
    ("data_type", "given", "expected"),
    [
        ("TYPE_FP16", 0.1, 0.199951171875),
        ("TYPE_FP32", 0.1, 0.20000000298023224),
        ("TYPE_UINT8", 200, 144.0),
        ("TYPE_INT8", 100, -56.0),
        ("TYPE_INT32", 2**30, -(2.0**31)),
        ("TYPE_INT64", 2**30, 2.0**31),
        ("TYPE_BOOL", 1, 1.0),
    ],
)
def test_inputs_are_cast_to_the_config_dtype(
    tmp_path: Path, data_type: str, given: float, expected: float
) -> None:
    _save(tmp_path / "model.pt", _Double())
    model = _model(tmp_path, _config({"X": data_type}, outputs=("Y",)))
    (result,) = model.process_batch([{"X": np.array([[given]], dtype=np.float64)}])
    assert result["Y"].dtype == np.float32  # every output leaves as FP32
    assert result["Y"].tolist() == [[np.float32(expected)]]


def test_inputs_go_to_the_module_in_config_order(tmp_path: Path) -> None:
    _save(tmp_path / "model.pt", _Affine())
    model = _model(tmp_path, _config({"B": "TYPE_FP32", "X": "TYPE_FP32"}))
    # forward(x, b) receives the config's first input, B, as its x.
    (result,) = model.process_batch([_request([[1, 2]], [[10, 20]])])
    assert result["Y"].tolist() == [[21.0, 42.0]] and result["S"].tolist() == [30.0]


def test_requests_of_one_shape_run_together_and_split_back(affine: TritonPythonModel) -> None:
    calls = []
    module = affine.module
    affine.module = lambda x, b: calls.append(tuple(x.shape)) or module(x, b)
    batch = [
        _request([[1, 2]], [[10, 20]]),
        _request([[3, 4], [5, 6]], [[0, 0], [1, 1]]),
        _request([[1, 1, 1]], [[0, 0, 0]]),  # another width: its own call
        _request([[0, 7]], [[1, 0]]),
    ]
    results = affine.process_batch(batch)
    assert sorted(calls) == [(1, 3), (4, 2)]
    assert results[0]["Y"].tolist() == [[12.0, 24.0]] and results[0]["S"].tolist() == [3.0]
    assert results[1]["Y"].tolist() == [[6.0, 8.0], [11.0, 13.0]]
    assert results[1]["S"].tolist() == [7.0, 11.0]
    assert results[2]["Y"].tolist() == [[2.0, 2.0, 2.0]] and results[2]["S"].tolist() == [3.0]
    assert results[3]["Y"].tolist() == [[1.0, 14.0]] and results[3]["S"].tolist() == [7.0]
    assert all(set(r) == {"Y", "S"} for r in results)


def test_a_failing_group_fails_alone(affine: TritonPythonModel) -> None:
    batch = [
        _request([[1, 2]], [[1, 1]]),
        _request([[1, 2, 3]], [[1, 1]]),  # X and B widths disagree: the module raises
        _request([[4, 4]], [[0, 0]]),
    ]
    results = affine.process_batch(batch)
    assert isinstance(results[1], RuntimeError) and "size of tensor" in str(results[1])
    assert not isinstance(results[1], InvalidInput)  # reported as the module's error
    assert results[0]["Y"].tolist() == [[3.0, 5.0]]
    assert results[2]["Y"].tolist() == [[8.0, 8.0]]


def test_a_request_missing_an_input_fails_with_its_group_only(
    affine: TritonPythonModel,
) -> None:
    results = affine.process_batch(
        [{"X": np.ones((1, 3), np.float32)}, _request([[1, 0]], [[0, 0]])]
    )
    assert isinstance(results[0], KeyError)
    assert results[1]["Y"].tolist() == [[2.0, 0.0]]


def test_unbatched_config_runs_whole_tensors(tmp_path: Path) -> None:
    _save(tmp_path / "model.pt", _Double())
    config = {**_config({"X": "TYPE_FP32"}, outputs=("Y",)), "max_batch_size": 0}
    model = _model(tmp_path, config)
    (result,) = model.process_batch([{"X": np.array([1.5, -2.0, 3.0], dtype=np.float32)}])
    assert result["Y"].tolist() == [3.0, -4.0, 6.0]


class _Total(torch.nn.Module):
    """The sum of the whole tensor, as a one-element tensor: wrong if requests are joined."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum().reshape(1)


def test_unbatched_requests_of_one_execute_run_one_by_one(tmp_path: Path) -> None:
    # max_batch_size 0: dimension 0 is not a batch, so two requests must not be joined on it
    # (joined, [1, 2] and [3, 4] gave one total of 10 and an empty second result).
    _save(tmp_path / "model.pt", _Total())
    config = {**_config({"X": "TYPE_FP32"}, outputs=("Y",)), "max_batch_size": 0}
    model = _model(tmp_path, config)
    requests = [{"X": np.array(v, dtype=np.float32)} for v in ([1, 2], [3, 4], [5, 6])]
    assert [r["Y"].tolist() for r in model.process_batch(requests)] == [[3.0], [7.0], [11.0]]


def test_graph_settings_capture_nothing_on_cpu(tmp_path: Path) -> None:
    _save(tmp_path / "model.pt", _Affine())
    cuda = {"graphs": True, "graph_spec": [{"batch_size": 2}]}
    config = {**_config({"X": "TYPE_FP32", "B": "TYPE_FP32"}), "optimization": {"cuda": cuda}}
    config["input"] = [{**spec, "dims": ["2"]} for spec in config["input"]]
    model = _model(tmp_path, config)
    assert model.graphs == {}
    (result,) = model.process_batch([_request([[1, 2]], [[0, 0]])])
    assert result["S"].tolist() == [3.0]


def test_profile_names_the_eager_phases(affine: TritonPythonModel, tmp_path: Path) -> None:
    affine.profile = ExecuteProfile(tmp_path / "profile.json")
    affine.process_batch([_request([[1, 2]], [[0, 0]])])
    assert set(affine.profile.seconds) == {"stack", "eager"}
    assert all(seconds >= 0 for seconds in affine.profile.seconds.values())


def _cpu_graph(model: TritonPythonModel, batch: int, width: int) -> CudaGraph:
    shapes = {"X": (batch, width), "B": (batch, width)}
    graph = CudaGraph(model._forward, shapes, model.input_dtypes, device="cpu")
    model.graphs[graph_key(shapes)] = graph
    return graph


def test_a_batch_runs_in_the_smallest_graph_that_holds_it(
    affine: TritonPythonModel, tmp_path: Path
) -> None:
    small, large = _cpu_graph(affine, 2, 2), _cpu_graph(affine, 4, 2)
    other = _cpu_graph(affine, 8, 3)
    affine.profile = ExecuteProfile(tmp_path / "profile.json")
    batch = [_request([[1, 2]], [[1, 0]]), _request([[3, 4], [5, 6]], [[0, 0], [0, 1]])]
    results = affine.process_batch(batch)
    assert (small.replays, large.replays, other.replays) == (0, 1, 0)
    assert set(affine.profile.seconds) == {"stack", "graph"}
    assert results[0]["Y"].tolist() == [[3.0, 4.0]] and results[0]["S"].tolist() == [3.0]
    assert results[1]["Y"].tolist() == [[6.0, 8.0], [10.0, 13.0]]
    assert results[1]["S"].tolist() == [7.0, 11.0]
    (alone,) = affine.process_batch([_request([[2, 2], [0, 1]], [[0, 0], [0, 0]])])
    assert (small.replays, large.replays) == (1, 1)
    assert alone["S"].tolist() == [4.0, 1.0]


def test_a_batch_larger_than_every_graph_runs_eagerly(affine: TritonPythonModel) -> None:
    graph = _cpu_graph(affine, 1, 2)
    (result,) = affine.process_batch([_request([[1, 2], [3, 4]], [[0, 0], [0, 0]])])
    assert graph.replays == 0
    assert result["S"].tolist() == [3.0, 7.0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the lent H100)")
def test_a_cuda_instance_captures_a_graph_per_spec(tmp_path: Path) -> None:
    twin = partial(_graphs_config_on_the_cpu, tmp_path)
    _where_cuda_can_start(_cuda_instance_captures_a_graph_per_spec, str(tmp_path), cpu_twin=twin)


class _ScaledAffine(torch.nn.Module):
    """``_Affine`` through a weight: a 1-D tensor, which must sit on the inputs' device (only
    0-dim CPU tensors mix with CUDA ones), so a module or input left on the CPU fails."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0]))

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.training:
            return torch.zeros_like(x), torch.zeros(x.shape[0])
        return x * self.scale + b, x.sum(dim=1)


def _graph_spec_config(tmp_path: Path) -> dict:
    _save(tmp_path / "model.pt", _ScaledAffine())
    cuda = {"graphs": True, "graph_spec": [{"batch_size": 1}, {"batch_size": 4}]}
    config = {**_config({"X": "TYPE_FP32", "B": "TYPE_FP32"}), "optimization": {"cuda": cuda}}
    config["input"] = [{**spec, "dims": ["2"]} for spec in config["input"]]
    return config


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the lent H100)")
def test_an_instance_goes_to_its_device_id(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    twin = partial(_initialize_picks_the_device, str(tmp_path / "cpu"), "CPU")
    _where_cuda_can_start(_instance_device_ids, str(tmp_path), cpu_twin=twin)


def _instance_device_ids(directory: str) -> None:
    """No id given: GPU 0. An id past the last GPU: refused, not quietly GPU 0."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr("triton_kit.python_models.common.base.require_numpy_1", lambda: None)
        assert _initialized(Path(directory) / "a", "GPU", None).device == torch.device("cuda:0")
        missing = str(torch.cuda.device_count())
        try:
            _initialized(Path(directory) / "b", "GPU", missing)
        except Exception as error:
            assert "ordinal" in str(error), error
        else:
            raise AssertionError(f"GPU {missing} was accepted on a host without it")


def _graphs_config_on_the_cpu(tmp_path: Path) -> None:
    """The same config and batches on the CPU: no graphs, the same numbers."""
    model = _model(tmp_path, _graph_spec_config(tmp_path))
    assert model.graphs == {}
    (one, two) = model.process_batch([_request([[1, 2]], [[1, 0]]), _request([[3, 4]], [[0, 0]])])
    assert one["Y"].tolist() == [[3.0, 4.0]] and two["Y"].tolist() == [[6.0, 8.0]]


def _cuda_instance_captures_a_graph_per_spec(directory: str) -> None:
    tmp_path = Path(directory)
    config = _graph_spec_config(tmp_path)
    model = _model(tmp_path, config, device="cuda:0")
    assert torch.get_num_threads() == 1 and torch.cuda.current_device() == 0
    graphs = {graph.batch: graph for graph in model.graphs.values()}
    assert sorted(graphs) == [1, 4] and all(graph.cuda for graph in graphs.values())
    batch = [_request([[1, 2]], [[1, 0]]), _request([[3, 4], [5, 6]], [[0, 0], [0, 1]])]
    results = model.process_batch(batch)
    assert (graphs[1].replays, graphs[4].replays) == (0, 1)
    assert results[0]["Y"].tolist() == [[3.0, 4.0]] and results[0]["S"].tolist() == [3.0]
    assert results[1]["Y"].tolist() == [[6.0, 8.0], [10.0, 13.0]]
    (wide,) = model.process_batch([_request([[1, 1, 1]], [[0, 1, 2]])])  # no graph: eager
    assert wide["Y"].tolist() == [[2.0, 3.0, 4.0]] and wide["S"].tolist() == [3.0]
