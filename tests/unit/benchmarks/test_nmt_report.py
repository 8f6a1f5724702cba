"""The NMT report's goal table names the right cause of each missed cell."""

from __future__ import annotations

from triton_kit.benchmarks.nmt import report
from triton_kit.benchmarks.nmt.run import Cell, markdown_table


def _cell(engine: str, beam: int, level: int, rate: float) -> Cell:
    return Cell(engine, beam, level, (0.01,) * 100, 100 / rate, 0, (), None)


def _cells(rates: dict[str, float], beam: int = 1, level: int = 8) -> list[Cell]:
    return [_cell(engine, beam, level, rate) for engine, rate in rates.items()]


def _goal_row(cells: list[Cell]) -> list[str]:
    text = report._goals(cells, markdown_table)
    return [part.strip() for part in text.splitlines()[2].strip("|").split("|")]


BASE = {report.CT2_FP32: 50.0, report.CT2_INT8: 100.0}


def test_a_cell_missed_by_the_engine_and_met_by_serving():
    row = _goal_row(_cells({**BASE, report.IN_PROCESS: 50.0, report.TRITON: 60.0}))
    assert row[2:] == [report.TRITON, "0.60", "0.50", "1.20", "missed: engine"]


def test_the_faster_served_precision_is_judged_and_serving_named():
    rates = {
        **BASE,
        report.IN_PROCESS: 50.0,
        report.TRITON: 40.0,
        report.IN_PROCESS_INT8: 120.0,
        report.TRITON_INT8: 90.0,
    }
    row = _goal_row(_cells(rates))
    assert row[2:] == [report.TRITON_INT8, "0.90", "1.20", "0.75", "missed: serving"]


def test_a_met_cell_and_c1_left_out():
    cells = _cells({**BASE, report.IN_PROCESS: 150.0, report.TRITON: 120.0}, level=32)
    cells += _cells({**BASE, report.IN_PROCESS: 1.0, report.TRITON: 1.0}, level=1)
    text = report._goals(cells, markdown_table)
    assert len(text.splitlines()) == 3 and text.splitlines()[2].endswith("| met |")
