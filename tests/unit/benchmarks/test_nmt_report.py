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
    table = report._goals(cells, markdown_table).split("\n\n")[0]  # the legend follows
    assert len(table.splitlines()) == 3 and table.splitlines()[2].endswith("| met |")


# Issue 32: benchmarks/results/nmt_in_engine.md had columns nobody defined ("before: ..."),
# negative "stub extra" overheads, and a sentence about a large-model run that never ran.
# These render a whole report from made-up cells and check the generator cannot do that again.


def _phased(engine: str, beam: int, level: int, rate: float, phases: dict) -> Cell:
    return Cell(engine, beam, level, (0.01,) * 10, 10 / rate, 10, ("x",) * 10, 1.0, phases)


def _report(cells: list[Cell], sizes: str = "tiny") -> str:
    import argparse

    from triton_kit.benchmarks.nmt.profile import StepProfile

    args = argparse.Namespace(
        sizes=sizes,
        threads=1,
        repeats=1,
        large_vocab=None,
        large_sentences=64,
        large_repeats=1,
        int8_sizes="tiny,large",
        torch_generate_sizes="tiny,large",
        torch_int8_sizes="tiny",
        graph_sizes="tiny",
    )
    return report.render(
        {"tiny": cells},
        machine="test machine",
        load=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
        seconds=1.0,
        args=args,
        table=markdown_table,
        date="today",
        profiles=[StepProfile("tiny fp32", 1, 0.2, 184, 63, 0.3, 0.3)],
    )


def _tiny_cells() -> list[Cell]:
    local = {"batch": 4.0, "ms/sentence": 3.0, "encoder share": 0.1, "decoder share": 0.6}
    local.update({"search share": 0.3, "encoder ms/call": 1.0, "decoder ms/step": 0.2})
    local["search ms/step"] = 0.1
    served = {"batch": 6.0, "queue ms/request": 2.0, "ms/sentence": 2.5}  # cheaper batches
    cells = []
    for beam, level in ((1, 8), (4, 32)):
        cells += [
            _phased(report.IN_PROCESS, beam, level, 300.0, local),
            _phased(report.TRITON, beam, level, 250.0, served),
            _phased(report.CT2_FP32, beam, level, 400.0, {}),
            _phased(report.CT2_INT8, beam, level, 500.0, {}),
            _phased(report.IN_ENGINE, beam, level, 200.0, {"batch": 4.0, "ms/sentence": 4.0}),
            _phased(report.TRITON_GRAPH, beam, level, 180.0, served),
        ]
    return cells


def _tables(text: str) -> list[list[str]]:
    """Each markdown table's header cells (a header is the line above a |---| line)."""
    lines = text.splitlines()
    return [
        [cell.strip() for cell in lines[i - 1].strip().strip("|").split("|")]
        for i, line in enumerate(lines)
        if line.startswith("|---")
    ]


def test_every_column_of_every_table_is_defined():
    text = _report(_tiny_cells())
    tables = _tables(text)[1:]  # the first is the run header (run | value)
    assert len(tables) >= 4
    for headers in tables:
        for header in headers:
            assert f"- `{header}`:" in text, f"column {header!r} is not defined"
    assert "before:" not in text


def test_no_overhead_column_can_read_negative():
    """Served batches cheaper per sentence than in process: the difference is reported as a
    signed difference, defined as such, never as an overhead ("extra") below zero."""
    text = _report(_tiny_cells())
    for headers, rows in _tables_with_rows(text):
        for column, header in enumerate(headers):
            if "extra" in header or "overhead" in header:
                assert all(not row[column].startswith("-") for row in rows), (header, rows)
    assert "served - in-process ms/sentence" in text


def _tables_with_rows(text: str) -> list[tuple[list[str], list[list[str]]]]:
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        if not line.startswith("|---"):
            continue
        headers = [c.strip() for c in lines[i - 1].strip().strip("|").split("|")]
        rows = []
        for row in lines[i + 1 :]:
            if not row.startswith("|"):
                break
            rows.append([c.strip() for c in row.strip().strip("|").split("|")])
        found.append((headers, rows))
    return found


def test_only_what_ran_is_described():
    """A tiny-only run of four engines: no sentence about the large model, nor about engines
    (int8, TorchScript) that were not measured, whatever the flags' defaults."""
    text = _report([c for c in _tiny_cells() if c.engine not in (report.IN_ENGINE,)])
    described = text.split("\n## ")[0]  # the header and what was measured, before the tables
    assert "Large:" not in text and "opus-mt" not in text
    assert "int8-dynamic" not in described and "TorchScript" not in described
    assert report.TRITON_GRAPH in described  # measured: described


def test_the_engine_search_becomes_default_only_if_as_fast_in_every_cell():
    def cells(graph_rates: list[float]) -> list[Cell]:
        found = []
        for (beam, level), rate in zip(((1, 8), (4, 32)), graph_rates, strict=True):
            found += _cells({report.TRITON: 100.0, report.TRITON_GRAPH: rate}, beam, level)
        return found

    assert "keeps today's search" in report._engine_default(cells([120.0, 99.0]), markdown_table)
    assert "can become the default" in report._engine_default(cells([120.0, 100.0]), markdown_table)


def test_one_command_takes_the_architecture(monkeypatch):
    """``python -m triton_kit.benchmarks.nmt --architecture rnn ARGS`` runs the recurrent
    benchmark with ARGS (Makefile's bench-nmt-rnn)."""
    from triton_kit.benchmarks.nmt import rnn, run

    seen = []
    monkeypatch.setattr(rnn, "main", seen.append)
    run.main(["--architecture", "rnn", "--beams", "4"])
    assert seen == [["--beams", "4"]]
