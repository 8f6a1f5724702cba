"""A python stub environment that cannot import an engine library (issue 31): the served
``bert`` and the python ``nmt`` in front of ``nmt_ct2`` (``--no-ct2-text``; the default ``nmt``
is the ctranslate2 backend's text mode, with no stub) must run without onnxruntime and torch in
their stubs.

The stub runs Python isolated (PYTHONPATH ignored) with the virtual environment of the
``python3`` first on PATH (triton_kit/server/binary.py ``server_environment``;
``TRITON_KIT_STUB_PYTHON`` picks it), so a test gives it one of its own: this venv's packages
and the project through a .pth file, and a ``sitecustomize`` that puts a finder refusing the
blocked packages first on ``sys.meta_path`` and logs every attempt and the pid of every
interpreter it starts in (``TRITON_KIT_BLOCKER_LOG``). A probe model tries the imports at load:
the control that the blocker is in effect.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.server import TritonServer

BLOCKED = ("onnxruntime", "torch")
ENGINE_LIBRARIES = ("onnxruntime_pybind11_state", "libtorch")
# The stub environment's sitecustomize: a finder first on sys.meta_path refuses both
# engines and logs each attempt; the pid of every interpreter it starts in is logged too.
SITECUSTOMIZE = """import importlib.abc
import os
import sys

BLOCKED = __BLOCKED__


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
        for name in __BLOCKED__:
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


def engine_free_environment(root: Path, blocked: Sequence[str] = BLOCKED) -> Path:
    """A virtual environment for the stubs: this interpreter, this venv's packages and the
    project (a .pth file), and the blocking ``sitecustomize``; its ``bin/python3``."""
    packages = root / Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix)
    packages.mkdir(parents=True)
    (packages / "triton_kit_test.pth").write_text(
        f"{sysconfig.get_paths()['purelib']}\n{PROJECT_ROOT}\n"
    )
    (packages / "sitecustomize.py").write_text(
        SITECUSTOMIZE.replace("__BLOCKED__", repr(tuple(blocked)))
    )
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


def add_probe(repository: Path, blocked: Sequence[str] = BLOCKED) -> None:
    """The ``engine_probe`` python model, which tries each blocked import at load."""
    (repository / "engine_probe" / "1").mkdir(parents=True)
    (repository / "engine_probe" / "config.pbtxt").write_text(PROBE_CONFIG)
    probe = PROBE.replace("__BLOCKED__", repr(tuple(blocked)))
    (repository / "engine_probe" / "1" / "model.py").write_text(probe)


def assert_blocked_and_untried(
    server: TritonServer, log: Path, model: str, blocked=BLOCKED, pid: int | None = None
):
    """``model``'s stub ran under the blocker and tried no blocked import; the probe's imports
    failed (the control); ``model``'s stub maps no engine library. ``pid``: which of the
    model's stubs (one instance each) when it has several; left out, it must have one."""
    if pid is None:
        (pid,) = stub_pids(server, model)
    assert pid in stub_pids(server, model), (model, pid)
    (probe,) = stub_pids(server, "engine_probe")
    lines = log.read_text().splitlines()
    assert f"{pid} loaded" in lines, f"the blocker did not run in the {model} stub: {lines}"
    for name in blocked:  # the control: a stub of this server cannot import it
        assert f"{probe} blocked {name}" in lines, lines
        wanted = f"{probe} probe {name}: ImportError: {name} is blocked in this stub (test)"
        assert wanted in lines, lines
    assert not [line for line in lines if line.startswith(f"{pid} blocked")], lines
    assert mapped_engines(pid) == set()


BLOCKER_LOG_ENV = "TRITON_KIT_BLOCKER_LOG"


@contextmanager
def stub_environment(python: Path, log: Path) -> Iterator[None]:
    """The environment a server started inside the block gives its stubs (``python``'s venv,
    the blocker's ``log``); restored after the block, so a server another fixture starts later
    (the session's) gets the ordinary stubs."""
    from triton_kit.server.binary import STUB_PYTHON_ENV

    saved = {name: os.environ.get(name) for name in (STUB_PYTHON_ENV, BLOCKER_LOG_ENV)}
    os.environ[STUB_PYTHON_ENV], os.environ[BLOCKER_LOG_ENV] = str(python), str(log)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def engine_free_server(
    source: Path, names: Sequence[str], root: Path
) -> Iterator[tuple[TritonServer, Path]]:
    """Triton on ``names`` of the repository ``source`` (symlinked, no copies) and the probe
    model, every python stub started under the blocker: the server and the blocker's log."""
    import shutil

    from triton_kit.server import ServerConfig

    for name in names:
        shutil.copytree(source / name, root / "repo" / name, copy_function=os.symlink)
    python = engine_free_environment(root / "env")
    add_probe(root / "repo")
    log = root / "blocker.log"
    config = ServerConfig(
        model_repository=root / "repo",
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=root / "tritonserver.log",
    )
    with ExitStack() as stack:
        with stub_environment(python, log):  # the stubs start with the server
            server = stack.enter_context(TritonServer(config))
        yield server, log
