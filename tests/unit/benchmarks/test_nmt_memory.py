"""The NMT memory report (``python -m triton_kit.benchmarks.nmt.memory``): its tables from
measured processes, and the engine libraries read from a real process's maps."""

from __future__ import annotations

import os

from triton_kit.benchmarks.harness.memory import ProcessMemory
from triton_kit.benchmarks.nmt import memory


def _layout(name: str, rss: list[float], engines: list[list[str]]) -> memory.Layout:
    processes = [ProcessMemory(pid, f"p{pid}", value) for pid, value in enumerate(rss, 100)]
    mapped = {p.pid: e for p, e in zip(processes, engines, strict=True)}
    return memory.Layout(name, ("--engine", "x"), processes, mapped, ["nmt"])


def test_the_summary_totals_each_layout_and_counts_processes_holding_an_engine() -> None:
    before = _layout(
        "before", [300.0, 150.0, 50.0], [["onnxruntime"], ["onnxruntime (python)"], []]
    )
    after = _layout("after", [210.0], [["ctranslate2"]])
    text = memory.report([before, after], "cmd", "machine", (1.0, 2.0))
    summary = [
        line
        for line in text.splitlines()
        if line.startswith("| before") or line.startswith("| after")
    ]
    assert summary[0].split("|")[4].strip() == "500"
    assert "2 process(es) mapping an engine" in summary[0]
    assert summary[1].split("|")[4].strip() == "210"
    assert "1 process(es) mapping an engine" in summary[1]
    assert "| p101 | 150 | onnxruntime (python) |" in text
    assert "| p102 | 50 | none |" in text


def test_mapped_engines_reads_this_process_maps() -> None:
    import onnxruntime  # noqa: F401  (maps its pybind module and library into this process)

    assert "onnxruntime (python)" in memory.mapped_engines(os.getpid())
    assert memory.mapped_engines(2**22 + 1) == []  # no such process
