"""The served ``bert`` needs no engine library in its python stub (issue 31).

``bert`` tokenises in its stub and calls ``bert_model`` through BLS; Triton's own
onnxruntime backend runs the encoder. Two checks against the real Triton:

- A server of ``bert`` and ``bert_model`` alone whose python stubs run in an environment
  where ``import onnxruntime`` and ``import torch`` fail. The stub runs Python isolated
  (PYTHONPATH ignored) with the virtual environment of the ``python3`` first on PATH
  (triton_kit/server/binary.py ``server_environment``; ``TRITON_KIT_STUB_PYTHON`` picks
  it), so the test gives it one of its own: this venv's packages and the project through a
  .pth file, and a ``sitecustomize`` that puts a finder refusing both first on
  ``sys.meta_path`` and logs every attempt and the pid of every interpreter it starts in.
  A probe model in the same server tries both imports at load: the control that the
  blocker is in effect. The ``bert`` stub must show the blocker loaded and no attempt. The
  embeddings are compared with sentence-transformers on the same checkpoint (cosine >=
  0.9999, as tests/integration/bert/test_bert.py).
- On the session's server, with onnxruntime installed, the ``bert`` stub has not mapped
  ONNX Runtime's Python module (``onnxruntime_pybind11_state``) nor libtorch
  (``/proc/<pid>/maps``); the ``nmt`` stub, which still runs ONNX Runtime itself, has: the
  control that shows the check can see a mapped engine.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.bert.test_bert import SENTENCES, assert_matches, expected
from tests.support.prerequisites import PROJECT_ROOT, require_models
from triton_kit.client import TritonClient
from triton_kit.server import ServerConfig, TritonServer
from triton_kit.server.binary import STUB_PYTHON_ENV

BLOCKED = ("onnxruntime", "torch")
ENGINE_LIBRARIES = ("onnxruntime_pybind11_state", "libtorch")
# The stub environment's sitecustomize: a finder first on sys.meta_path refuses both
# engines and logs each attempt; the pid of every interpreter it starts in is logged too.
SITECUSTOMIZE = """import importlib.abc
import os
import sys

BLOCKED = ("onnxruntime", "torch")


def _note(line):
    with open(os.environ["TRITON_KIT_BLOCKER_LOG"], "a") as log:
        log.write(f"{os.getpid()} {line}\\n")


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            _note(f"blocked {name}")
            raise ModuleNotFoundError(f"{name} is blocked in this stub (test)", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
_note("loaded")
"""
# A python model beside bert that tries both imports at load: the control that the stubs
# of this server really cannot import them.
PROBE = """import os


class TritonPythonModel:
    def initialize(self, args):
        for name in ("onnxruntime", "torch"):
            try:
                __import__(name)
                outcome = "imported"
            except ImportError as exc:
                outcome = f"ImportError: {exc}"
            with open(os.environ["TRITON_KIT_BLOCKER_LOG"], "a") as log:
                log.write(f"{os.getpid()} probe {name}: {outcome}\\n")

    def execute(self, requests):
        return []
"""
PROBE_CONFIG = """name: "engine_probe"
backend: "python"
input { name: "X" data_type: TYPE_FP32 dims: [1] }
output { name: "Y" data_type: TYPE_FP32 dims: [1] }
instance_group { count: 1 kind: KIND_CPU }
"""


def engine_free_environment(root: Path) -> Path:
    """A virtual environment for the stubs: this interpreter, this venv's packages and the
    project (a .pth file), and the blocking ``sitecustomize``; its ``bin/python3``."""
    packages = root / Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix)
    packages.mkdir(parents=True)
    (packages / "triton_kit_test.pth").write_text(
        f"{sysconfig.get_paths()['purelib']}\n{PROJECT_ROOT}\n"
    )
    (packages / "sitecustomize.py").write_text(SITECUSTOMIZE)
    interpreter = Path(sys._base_executable)  # what the venv's python links to
    (root / "pyvenv.cfg").write_text(
        f"home = {interpreter.parent}\ninclude-system-site-packages = false\n"
        f"version = {platform.python_version()}\n"
    )
    (root / "bin").mkdir()
    (root / "bin" / "python3").symlink_to(interpreter)
    return root / "bin" / "python3"


def stub_pids(server: TritonServer, model: str) -> list[int]:
    """Pids of the python stubs serving ``model`` (the stub's first argument is
    ``<repository>/<model>/<version>/model.py``)."""
    assert server._process is not None
    pids = []
    for child in psutil.Process(server._process.pid).children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.Error:
            continue
        is_stub = len(command) > 1 and "triton_python_backend_stub" in Path(command[0]).name
        if is_stub and Path(command[1]).parts[-3:-2] == (model,):
            pids.append(child.pid)
    return pids


def mapped_engines(pid: int) -> set[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {name for name in ENGINE_LIBRARIES if name in maps}


@pytest.fixture(scope="module")
def blocked_server(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TritonServer, Path]]:
    require_models("bert", "bert_model")
    root = tmp_path_factory.mktemp("engine-free")
    for name in ("bert", "bert_model"):  # links to the built files, no copies
        shutil.copytree(model_repository / name, root / "repo" / name, copy_function=os.symlink)
    python = engine_free_environment(root / "env")
    (root / "repo" / "engine_probe" / "1").mkdir(parents=True)
    (root / "repo" / "engine_probe" / "config.pbtxt").write_text(PROBE_CONFIG)
    (root / "repo" / "engine_probe" / "1" / "model.py").write_text(PROBE)
    log = root / "blocker.log"
    config = ServerConfig(
        model_repository=root / "repo",
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=root / "tritonserver.log",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STUB_PYTHON_ENV, str(python))
        patch.setenv("TRITON_KIT_BLOCKER_LOG", str(log))
        with TritonServer(config) as server:
            yield server, log


@pytest.fixture(scope="module")
def reference(model_repository: Path) -> Any:
    from tests.integration.bert.test_bert import checkpoint_dir

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(checkpoint_dir(model_repository)), device="cpu")


def test_bert_serves_from_a_stub_that_cannot_import_an_engine(
    blocked_server: tuple[TritonServer, Path], reference: Any
) -> None:
    server, log = blocked_server
    with TritonClient(server.grpc_url, timeout=120) as client:
        served = client.embed(SENTENCES)
    assert_matches(served, expected(reference, SENTENCES), SENTENCES)
    (pid,) = stub_pids(server, "bert")
    (probe,) = stub_pids(server, "engine_probe")
    lines = log.read_text().splitlines()
    assert f"{pid} loaded" in lines, f"the blocker did not run in the bert stub: {lines}"
    for name in BLOCKED:  # the control: a stub of this server cannot import either
        assert f"{probe} blocked {name}" in lines, lines
        wanted = f"{probe} probe {name}: ImportError: {name} is blocked in this stub (test)"
        assert wanted in lines, lines
    assert not [line for line in lines if line.startswith(f"{pid} blocked")], lines
    assert mapped_engines(pid) == set()


def test_the_served_bert_stub_maps_no_engine(triton_server: TritonServer) -> None:
    require_models("bert", "nmt")
    with TritonClient(triton_server.grpc_url, timeout=120) as client:
        client.embed(["map check"])
        client.translate("four hundred")  # the control stub has run its engine too
    (bert,) = stub_pids(triton_server, "bert")
    assert mapped_engines(bert) == set()
    controls = stub_pids(triton_server, "nmt")
    assert controls and all("onnxruntime_pybind11_state" in mapped_engines(p) for p in controls)
