"""``triton_kit.benchmarks.harness.memory``: stubs are named by the model they serve, and
the RSS table is read from real processes (this one and a child)."""

from __future__ import annotations

import os
import subprocess
import sys

from triton_kit.benchmarks.harness.memory import (
    ProcessMemory,
    memory_lines,
    server_tree_rss,
    stub_model,
)


def test_a_stub_is_named_by_its_model_path() -> None:
    stub = "/x/backends/python/triton_python_backend_stub"
    assert stub_model([stub, "/repo/bert/1/model.py", "shm", "1048576"]) == "bert"
    assert stub_model([stub]) == "?"
    assert stub_model(["/usr/bin/python3", "/repo/bert/1/model.py"]) is None
    assert stub_model([]) is None


def test_the_tree_lists_the_root_first_and_its_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        rows = server_tree_rss(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert rows[0].pid == os.getpid() and rows[0].rss_mib > 1
    assert child.pid in [row.pid for row in rows[1:]]


def test_the_table_totals_the_rows() -> None:
    rows = [ProcessMemory(1, "tritonserver", 100.4), ProcessMemory(2, "stub bert", 50.2)]
    assert memory_lines(rows)[-1] == "| **total** | **151** |"
    assert memory_lines(rows)[3] == "| stub bert | 50 |"
