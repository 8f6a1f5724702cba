"""``triton_kit.python_models.common.tensorrt_sidecar``: the plan record and the flag the compose
service asks for.

The expected JSON is written out by hand (keys sorted, two-space indent, a final newline),
and the flag is tensorrt_backend r24.10's ``--backend-config=tensorrt,version-compatible=true``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triton_kit.python_models.common.tensorrt_sidecar import (
    SIDECAR_NAME,
    VERSION_COMPATIBLE_FLAG,
    Sidecar,
    backend_config_args,
    is_version_compatible,
    main,
    sidecars,
)

FLAG = "--backend-config=tensorrt,version-compatible=true"


def _sidecar(**changes: object) -> Sidecar:
    values: dict = dict(
        model="bert_model",
        family="bert",
        tensorrt_version="10.5.0",
        gpu_name="H100",
        compute_capability="9.0",
        precision="fp16",
        onnx_sha256="ab",
        profiles=[{"input_ids": {"min": [1, 16], "opt": [8, 128], "max": [32, 512]}}],
        build_options={"version_compatible": True},
        rebuild_command="python -m triton_kit.build_engines bert",
    )
    return Sidecar(**{**values, **changes})


def test_names() -> None:
    assert SIDECAR_NAME == "model.plan.json"
    assert VERSION_COMPATIBLE_FLAG == FLAG


def test_to_json_is_sorted_indented_and_ends_with_a_newline() -> None:
    text = _sidecar(profiles=[], build_options={"b": 1, "a": 2}).to_json()
    assert text == (
        "{\n"
        '  "build_options": {\n'
        '    "a": 2,\n'
        '    "b": 1\n'
        "  },\n"
        '  "built_at": "",\n'
        '  "compute_capability": "9.0",\n'
        '  "extra": {},\n'
        '  "family": "bert",\n'
        '  "gpu_name": "H100",\n'
        '  "model": "bert_model",\n'
        '  "onnx_sha256": "ab",\n'
        '  "precision": "fp16",\n'
        '  "profiles": [],\n'
        '  "rebuild_command": "python -m triton_kit.build_engines bert",\n'
        '  "tensorrt_version": "10.5.0"\n'
        "}\n"
    )


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    sidecar = _sidecar(built_at="2026-11-23", extra={"k": [1]})
    path = tmp_path / SIDECAR_NAME
    path.write_text(sidecar.to_json())
    assert Sidecar.read(path) == sidecar
    assert Sidecar.read(str(path)) == sidecar
    assert Sidecar.from_json(sidecar.to_json()) == sidecar


def _repository(tmp_path: Path, records: dict[str, str]) -> Path:
    for relative, text in records.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_sidecars_are_the_version_directories_records_sorted(tmp_path: Path) -> None:
    repository = _repository(
        tmp_path,
        {
            f"b/1/{SIDECAR_NAME}": "{}",
            f"a/2/{SIDECAR_NAME}": "{}",
            f"a/1/{SIDECAR_NAME}": "{}",
            f"c/{SIDECAR_NAME}": "{}",  # not in a version directory
            "d/1/model.plan": "",
        },
    )
    assert sidecars(str(repository)) == [
        repository / "a/1" / SIDECAR_NAME,
        repository / "a/2" / SIDECAR_NAME,
        repository / "b/1" / SIDECAR_NAME,
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_sidecar().to_json(), True),
        (_sidecar(build_options={"version_compatible": False}).to_json(), False),
        (_sidecar(build_options={}).to_json(), False),
        ('{"model": "x"}', False),
        ("not json", False),
    ],
)
def test_is_version_compatible(tmp_path: Path, text: str, expected: bool) -> None:
    path = tmp_path / SIDECAR_NAME
    path.write_text(text)
    assert is_version_compatible(path) is expected


def test_an_unreadable_sidecar_is_not_version_compatible(tmp_path: Path) -> None:
    assert is_version_compatible(tmp_path / "missing.json") is False
    assert is_version_compatible(tmp_path) is False  # a directory: OSError


def test_backend_config_args(tmp_path: Path) -> None:
    plain = json.dumps({"build_options": {"version_compatible": False}})
    assert backend_config_args(tmp_path) == []
    _repository(tmp_path, {f"a/1/{SIDECAR_NAME}": plain})
    assert backend_config_args(tmp_path) == []
    _repository(tmp_path, {f"b/1/{SIDECAR_NAME}": _sidecar().to_json()})
    assert backend_config_args(str(tmp_path)) == [FLAG]


def test_main_prints_the_flag_or_an_empty_line(tmp_path: Path, capsys) -> None:
    assert main(["backend-config", str(tmp_path)]) == 0
    assert capsys.readouterr() == ("\n", "")
    _repository(tmp_path, {f"b/1/{SIDECAR_NAME}": _sidecar().to_json()})
    assert main(["backend-config", str(tmp_path)]) == 0
    assert capsys.readouterr() == (FLAG + "\n", "")


@pytest.mark.parametrize("argv", [[], ["backend-config"], ["config", "/models"], ["a", "b", "c"]])
def test_main_usage(argv: list[str], capsys) -> None:
    assert main(argv) == 2
    assert capsys.readouterr() == (
        "",
        "usage: python -m triton_kit.python_models.common.tensorrt_sidecar "
        "backend-config REPOSITORY\n",
    )


def test_main_reads_sys_argv(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.argv", ["tensorrt_sidecar", "backend-config", str(tmp_path)])
    assert main() == 0
    assert capsys.readouterr().out == "\n"
