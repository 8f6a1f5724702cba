"""``triton_kit.python_models.common.base`` without a server: pb_utils is
tests/support/pb_utils_standin.py.

Expected values are worked by hand: a model that doubles ``A`` (plus an optional
``OFFSET``), Triton's error codes by number (INTERNAL 1, INVALID_ARG 3), the profile's
milliseconds per execute from the seconds added.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from tests.support import pb_utils_standin as standin
from tests.support.pb_utils_standin import error_of, outputs, request
from triton_kit.python_models.common import base
from triton_kit.python_models.common.base import (
    PROFILE_DIR_ENV,
    ExecuteProfile,
    InvalidInput,
    PythonModel,
    array_response,
    error_response,
    require_numpy_1,
)

CONFIG = {
    "name": "doubler",
    "max_batch_size": 8,
    "input": [
        {"name": "A", "data_type": "TYPE_FP64", "dims": [-1]},
        {"name": "OFFSET", "data_type": "TYPE_INT32", "dims": [1], "optional": True},
    ],
    "output": [
        {"name": "DOUBLED", "data_type": "TYPE_FP32", "dims": [-1]},
        {"name": "NAMES", "data_type": "TYPE_STRING", "dims": [1]},
    ],
    "parameters": {"label": {"string_value": " x "}},
}


@pytest.fixture(autouse=True)
def pb_utils(monkeypatch):
    monkeypatch.delenv(PROFILE_DIR_ENV, raising=False)
    return standin.install(monkeypatch, "triton_kit.python_models.common.base")


class Doubler(PythonModel):
    setups = 0

    def setup(self) -> None:
        self.label = self.params.str("label", "none")
        Doubler.setups += 1

    def process_one(self, inputs):
        a = inputs["A"]
        if a.size == 0:
            raise InvalidInput("A is empty")
        if np.isnan(a).any():
            raise ZeroDivisionError("nan in A")
        offset = int(inputs["OFFSET"].reshape(-1)[0]) if "OFFSET" in inputs else 0
        return {"DOUBLED": 2 * a + offset, "NAMES": np.array([[self.label]], dtype=object)}


def _model(tmp_path: Path, config: dict = CONFIG, cls: type = Doubler) -> PythonModel:
    model = cls()
    model.initialize(
        {
            "model_config": json.dumps(config),
            "model_name": "doubler",
            "model_repository": str(tmp_path / "doubler"),
            "model_version": "3",
        }
    )
    return model


def test_invalid_input_is_invalid_arg_with_its_message_alone() -> None:
    code, message = error_of(error_response(InvalidInput("missing input 'A'")))
    assert (code, message) == (3, "missing input 'A'")


def test_other_exceptions_are_internal_and_named() -> None:
    assert error_of(error_response(KeyError("x"))) == (1, "KeyError: 'x'")
    assert error_of(error_response(ValueError("bad"))) == (1, "ValueError: bad")


def test_array_response_casts_to_the_config_dtype_only() -> None:
    strided = np.arange(6, dtype=np.float64).reshape(2, 3).T  # not C-contiguous
    response = array_response(
        {"X": strided, "Y": np.array([7, 8], dtype=np.int16)}, {"X": np.dtype(np.float32)}
    )
    tensors = response.output_tensors()
    assert [t.name() for t in tensors] == ["X", "Y"]
    assert tensors[0].as_numpy().dtype == np.float32
    assert tensors[0].as_numpy().flags.c_contiguous
    assert tensors[0].as_numpy().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert tensors[1].as_numpy().dtype == np.int16
    assert tensors[1].as_numpy().tolist() == [7, 8]


def test_array_response_hands_a_dlpack_tensor_out_where_it_is(
    pb_utils, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torch tensor (what a GPU model keeps on its device) goes through
    ``Tensor.from_dlpack`` unchanged, not copied into a numpy array; numpy arrays, which have
    ``__dlpack__`` too, still go through ``Tensor(name, array)``."""
    torch = pytest.importorskip("torch")
    handed: list[tuple[str, object]] = []

    def from_dlpack(name: str, value: object) -> standin.Tensor:
        handed.append((name, value))
        return standin.Tensor(name, np.from_dlpack(value))

    monkeypatch.setattr(pb_utils.Tensor, "from_dlpack", staticmethod(from_dlpack), raising=False)
    rows = torch.arange(12, dtype=torch.float32).reshape(3, 4)[1:]  # a view, as a request's rows
    response = array_response(
        {"P": rows, "N": np.array([1.5], dtype=np.float64)}, {"P": np.dtype(np.float32)}
    )
    assert [(name, value is rows) for name, value in handed] == [("P", True)]
    received = outputs(response)
    assert received["P"].tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert received["N"].dtype == np.float64


@pytest.mark.parametrize("version", ["1.26.4", "1.99.0", "0.9"])
def test_numpy_1_is_accepted(version: str) -> None:
    require_numpy_1(version)


@pytest.mark.parametrize("version", ["2.0.0", "2.5.1", "10.1"])
def test_numpy_2_and_later_are_refused(version: str) -> None:
    with pytest.raises(RuntimeError) as info:
        require_numpy_1(version)
    assert str(info.value) == (
        f"numpy {version} in the python backend's environment: Triton 2.51's stub needs "
        "numpy<2 (wrong values otherwise). Give the stubs a numpy<2 environment, e.g. "
        "TRITON_KIT_STUB_PYTHON=<venv>/bin/python3 (scripts/gpu/bench.sh does this)."
    )


def test_the_installed_numpy_is_1() -> None:
    assert np.__version__.startswith("1.")  # the stub's pin (nvidia-pytriton)
    require_numpy_1()


def test_initialize_reads_the_config(tmp_path: Path) -> None:
    before = Doubler.setups
    model = _model(tmp_path)
    assert Doubler.setups == before + 1
    assert model.model_name == "doubler"
    assert model.version_dir == tmp_path / "doubler" / "3"
    assert model.max_batch_size == 8
    assert model.input_names == ["A", "OFFSET"]
    assert model.optional_inputs == {"OFFSET"}
    assert model.output_dtypes == {"DOUBLED": np.dtype(np.float32), "NAMES": np.dtype(object)}
    assert model.label == "x"
    assert model.profile is None


def test_initialize_defaults_for_a_bare_config(tmp_path: Path) -> None:
    model = _model(tmp_path, {"name": "doubler"})
    assert model.max_batch_size == 0
    assert model.input_names == []
    assert model.optional_inputs == set()
    assert model.output_dtypes == {}


def test_execute_answers_each_request_on_its_own(tmp_path: Path, caplog) -> None:
    model = _model(tmp_path)
    requests = [
        request({"A": np.array([1.5, -2.0])}),
        request({"OFFSET": np.array([1], dtype=np.int32)}),  # A missing
        request({"A": np.array([1.0]), "OFFSET": np.array([10], dtype=np.int32)}),
        request({"A": np.zeros(0)}),
        request({"A": np.array([np.nan])}),
    ]
    with caplog.at_level(logging.ERROR, logger="python_models"):
        responses = model.execute(requests)
    assert len(responses) == 5
    first = outputs(responses[0])
    assert first["DOUBLED"].dtype == np.float32
    assert first["DOUBLED"].tolist() == [3.0, -4.0]
    assert first["NAMES"].tolist() == [[b"x"]]
    assert error_of(responses[1]) == (3, "missing input 'A'")
    assert outputs(responses[2])["DOUBLED"].tolist() == [12.0]
    assert error_of(responses[3]) == (3, "A is empty")
    assert error_of(responses[4]) == (1, "ZeroDivisionError: nan in A")
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1  # only the unexpected error is logged, with its traceback
    assert logged[0].startswith("doubler: Traceback (most recent call last)")
    assert "ZeroDivisionError: nan in A" in logged[0]


def test_a_missing_optional_input_is_skipped_and_the_next_one_read(tmp_path: Path) -> None:
    config = {**CONFIG, "input": [CONFIG["input"][1], CONFIG["input"][0]]}  # OFFSET first
    model = _model(tmp_path, config)
    assert model.read_inputs(request({"A": np.array([4.0])})).keys() == {"A"}
    (response,) = model.execute([request({"A": np.array([4.0])})])
    assert outputs(response)["DOUBLED"].tolist() == [8.0]


class BatchFails(Doubler):
    def process_batch(self, batch):
        raise MemoryError("out of memory")


def test_a_failing_batch_fails_every_read_request_but_keeps_read_errors(tmp_path: Path) -> None:
    model = _model(tmp_path, cls=BatchFails)
    responses = model.execute([request({"A": np.ones(1)}), request({}), request({"A": np.ones(2)})])
    assert error_of(responses[0]) == (1, "MemoryError: out of memory")
    assert error_of(responses[1]) == (3, "missing input 'A'")
    assert error_of(responses[2]) == (1, "MemoryError: out of memory")


class Bare(PythonModel):
    pass


def test_the_base_model_must_be_given_process_one(tmp_path: Path) -> None:
    model = _model(tmp_path, cls=Bare)
    (response,) = model.execute([request({"A": np.ones(1)})])
    assert error_of(response) == (1, "NotImplementedError: ")


def test_only_bad_requests_run_nothing(tmp_path: Path) -> None:
    model = _model(tmp_path, cls=BatchFails)
    responses = model.execute([request({})])
    assert error_of(responses[0]) == (3, "missing input 'A'")
    assert model.execute([]) == []


def test_profile_sums_phases_and_writes_every_hundred_executes(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    profile = ExecuteProfile(path)
    profile.add("encode", 0.5)
    profile.add("encode", 0.25)
    profile.add("decode", 0.001)
    for _ in range(99):
        profile.executed(2)
    assert not path.exists()
    profile.executed(3)
    assert json.loads(path.read_text()) == {
        "executes": 100,
        "requests": 201,
        "ms_per_execute": {"encode": 7.5, "decode": 0.01},
    }
    assert path.read_text().endswith("}\n")


def test_an_empty_profile_flushes_zero_executes(tmp_path: Path) -> None:
    profile = ExecuteProfile(tmp_path / "p.json")
    profile.add("x", 0.002)
    profile.add("y", 0.00001234)  # 0.01234 ms: rounded to 4 places
    profile.flush()
    assert json.loads((tmp_path / "p.json").read_text()) == {
        "executes": 0,
        "requests": 0,
        "ms_per_execute": {"x": 2.0, "y": 0.0123},
    }


def test_profiled_execute_times_every_phase(tmp_path: Path, monkeypatch) -> None:
    import os

    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path))
    model = _model(tmp_path)
    assert model.profile.path == tmp_path / f"doubler-{os.getpid()}.json"
    ticks = iter(float(t) for t in range(10, 100))
    monkeypatch.setattr(base.time, "perf_counter", lambda: next(ticks))
    responses = model.execute([request({"A": np.ones(1)}), request({"A": np.ones(3)})])
    assert outputs(responses[1])["DOUBLED"].tolist() == [2.0, 2.0, 2.0]
    # perf_counter: execute start 10, _execute start 11, read_inputs 12, process_batch 13,
    # responses 14, execute end 15.
    assert dict(model.profile.seconds) == {
        "read_inputs": 1.0,
        "process_batch": 1.0,
        "responses": 1.0,
        "execute": 5.0,
    }
    assert (model.profile.executes, model.profile.requests) == (1, 2)
    assert model.timed("x", 12.0) == 16.0
    assert model.profile.seconds["x"] == 4.0
    model.finalize()
    written = json.loads(model.profile.path.read_text())
    assert written["executes"] == 1
    assert written["ms_per_execute"]["execute"] == 5000.0


def test_unprofiled_timed_returns_now_and_finalize_writes_nothing(tmp_path, monkeypatch) -> None:
    model = _model(tmp_path)
    monkeypatch.setattr(base.time, "perf_counter", lambda: 42.0)
    assert model.timed("x", 1.0) == 42.0
    model.finalize()
    assert list(tmp_path.iterdir()) == []
