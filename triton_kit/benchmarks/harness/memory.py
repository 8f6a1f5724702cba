"""Resident memory (RSS) of a running tritonserver and its python-backend stubs.

Why: where an engine runs shows in memory. A python model that opens an ONNX Runtime or
torch session inside its stub holds a second copy of the engine beside the native
backend's; the RSS of the server process tree, stub by stub, makes that visible. Each stub
is named by the model it serves (the stub's first argument is ``<repo>/<model>/<version>/
model.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    label: str  # "tritonserver" or "stub <model>"
    rss_mib: float


def stub_model(cmdline: list[str]) -> str | None:
    """The model a python-backend stub serves, from its command line; None for other processes."""
    if not cmdline or not PurePath(cmdline[0]).name.startswith("triton_python_backend_stub"):
        return None
    parts = PurePath(cmdline[1]).parts if len(cmdline) > 1 else ()
    return parts[-3] if len(parts) >= 3 else "?"


def server_tree_rss(pid: int) -> list[ProcessMemory]:
    """The server process and every descendant still alive, server first."""
    import psutil

    root = psutil.Process(pid)
    rows = []
    for process in [root, *root.children(recursive=True)]:
        try:
            model = stub_model(process.cmdline())
            rss = process.memory_info().rss / 2**20
        except psutil.Error:
            continue
        label = process.name() if process.pid == pid else f"stub {model or process.name()}"
        rows.append(ProcessMemory(process.pid, label, rss))
    return rows


def memory_lines(rows: list[ProcessMemory]) -> list[str]:
    """A Markdown table: one row per process and the total."""
    lines = ["| process | RSS MiB |", "| --- | ---: |"]
    lines += [f"| {row.label} | {row.rss_mib:.0f} |" for row in rows]
    lines.append(f"| **total** | **{sum(row.rss_mib for row in rows):.0f}** |")
    return lines
