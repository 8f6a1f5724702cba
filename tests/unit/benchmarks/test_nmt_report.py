"""The NMT report's goal table names the right cause of each missed cell."""

from __future__ import annotations

from triton_kit.benchmarks.harness.measure import markdown_table
from triton_kit.benchmarks.nmt import report
from triton_kit.benchmarks.nmt.measure import Cell


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

    assert "the Python search stays ahead" in report._engine_default(
        cells([120.0, 99.0]), markdown_table
    )
    assert "meets issue 31's rule" in report._engine_default(cells([120.0, 100.0]), markdown_table)


def test_one_command_takes_the_architecture():
    """``python -m triton_kit.benchmarks.nmt --architecture rnn`` (Makefile's bench-nmt-rnn) is
    the same benchmark with the recurrent model's defaults: nmt_rnn beside nmt, in process and
    served, one run of the matrix, its own report; the Transformer's defaults are unchanged."""
    from triton_kit.benchmarks import RESULTS
    from triton_kit.benchmarks.nmt.run import parse_args

    rnn = parse_args(["--architecture", "rnn", "--beams", "4"])
    assert (rnn.architecture, rnn.beams, rnn.output) == ("rnn", "4", RESULTS / "nmt_rnn.md")
    assert (rnn.sizes, rnn.repeats, rnn.sentences_per_client, rnn.concurrency) == (
        "tiny",
        1,
        8,
        "1,8,32",
    )
    assert rnn.int8_sizes == rnn.graph_sizes == rnn.torch_generate_sizes == ""
    transformer = parse_args([])
    assert (transformer.sizes, transformer.repeats, transformer.output) == (
        "tiny,large",
        3,
        RESULTS / "nmt.md",
    )
    assert (transformer.int8_sizes, transformer.graph_sizes) == ("tiny,large", "tiny")


def test_what_applies_to_which_architecture():
    """CTranslate2 converts only Marian and ONNX Runtime's BeamSearch graph is the
    Transformer's only: the recurrent model's run measures neither, and refuses the graph."""
    import argparse

    import pytest

    from triton_kit.benchmarks.nmt.architectures import BENCHMARKED
    from triton_kit.benchmarks.nmt.matrix import suites
    from triton_kit.benchmarks.nmt.run import parse_args

    rnn, transformer = BENCHMARKED["rnn"], BENCHMARKED["transformer"]
    assert report.CT2_INT8 in transformer.engines and report.CT2_INT8 not in rnn.engines
    assert "graph" in transformer.variants and "graph" not in rnn.variants
    assert rnn.beside == ("transformer",) and transformer.beside == ()
    assert rnn.architecture().names.bls == "nmt_rnn"
    args = parse_args(["--architecture", "rnn", "--graph-sizes", "tiny"])
    with pytest.raises(SystemExit, match="rnn has no graph build"):
        suites(args, argparse.Namespace())  # refused before the workdir is touched


def test_the_rnn_run_writes_the_comparison_report(tmp_path, monkeypatch):
    """The matrix (stubbed) runs the Transformer's suite, then the recurrent model's, on the
    recurrent model's engines; their cells make results/nmt_rnn.md's tables."""
    from triton_kit.benchmarks.nmt import run

    seen = []

    def fake_run(suite, workdir, threads):
        seen.append((suite.architecture, suite.names.bls, suite.engines))
        rate = 100.0 if suite.architecture == "rnn" else 50.0
        return [
            _phased(engine, 1, 8, rate * (1 if engine == report.IN_PROCESS else 0.5), {})
            for engine in suite.engines
        ]

    monkeypatch.setattr(run, "run_suite", fake_run)
    monkeypatch.setattr("triton_kit.benchmarks.nmt.matrix.copy_models", lambda *a: None)
    output = tmp_path / "nmt_rnn.md"
    argv = ["--architecture", "rnn", "--beams", "1", "--concurrency", "8"]
    run.main([*argv, "--output", str(output)])
    engines = (report.IN_PROCESS, report.TRITON)
    assert seen == [("transformer", "nmt", engines), ("rnn", "nmt_rnn", engines)]
    text = output.read_text()
    assert "recurrent (nmt_rnn) beside the Transformer (nmt)" in text
    ratios, measurements = [rows for _, rows in _tables_with_rows(text)[1:]]
    assert ratios == [["1", "8", "0.50", "0.50", "2.00", "2.00"]]
    assert [row[:2] for row in measurements] == [
        [report.TRANSFORMER_LABEL, "in-process"],
        [report.TRANSFORMER_LABEL, "Triton"],
        [report.RNN_LABEL, "in-process"],
        [report.RNN_LABEL, "Triton"],
    ]


def test_served_ctranslate2_is_judged_against_in_process_ct2_and_the_default():
    """The kit's ctranslate2 backend (issue 31): its twin is CTranslate2 int8 in process, and
    a column compares it with the served Python search (the default before it); the goal table can
    pick it."""
    rates = {**BASE, report.IN_PROCESS: 50.0, report.TRITON: 40.0, report.TRITON_CT2: 90.0}
    text = report._pivot(_cells({**rates, report.TRITON_CT2_DIRECT: 95.0}), markdown_table)
    headers = _tables(text)[0]
    row = [part.strip() for part in text.splitlines()[2].strip("|").split("|")]
    values = dict(zip(headers, row, strict=True))
    assert values["Triton ctranslate2 / in-process ctranslate2"] == "0.90"
    assert values["Triton ctranslate2 / Triton"] == "2.25"
    assert values["nmt_ct2 direct / CT2 int8"] == "0.95"
    assert "- `Triton ctranslate2 / Triton`:" in text
    goal = _goal_row(_cells(rates))
    assert goal[2:4] == [report.TRITON_CT2, "0.90"]


def test_the_ct2_build_is_a_transformer_variant_measured_by_default():
    """nmt's engine since issue 31, with the python nmt in front (--no-ct2-text; the default
    build is the text mode, ct2-text): the Transformer's run measures it at the tiny size (its
    backend is one make backends builds); the recurrent model has none."""
    from triton_kit.benchmarks.nmt.architectures import BENCHMARKED, VARIANTS
    from triton_kit.benchmarks.nmt.run import parse_args

    assert "ct2" in BENCHMARKED["transformer"].variants
    assert "ct2" not in BENCHMARKED["rnn"].variants
    assert VARIANTS["ct2"].local is None and VARIANTS["ct2"].served == report.TRITON_CT2
    assert report.TRITON_CT2_DIRECT in report.ENGINE_MEANINGS
    assert parse_args([]).ct2_sizes == "tiny"
    assert parse_args(["--architecture", "rnn"]).ct2_sizes == ""
    assert parse_args(["--ct2-sizes", ""]).ct2_sizes == ""
    assert VARIANTS["ct2"].build_args == (
        "--engine",
        "ctranslate2",
        "--search",
        "engine",
        "--no-ct2-text",
    )


def test_the_rnn_report_judges_its_torchscript_search_against_the_python_search(
    tmp_path, monkeypatch
):
    """``--torch-generate-sizes tiny``: the recurrent model's served TorchScript search gets a
    ratio to its served Python search (what decides its default, families/nmt/defaults.py),
    and the notes say where each search runs (the Python search runs its steps in the stub:
    no BLS call per step since issue 11)."""
    from triton_kit.benchmarks.nmt import run

    rates = {report.IN_PROCESS: 100.0, report.TRITON: 50.0}
    rates |= {report.IN_PROCESS_TORCH: 90.0, report.TRITON_TORCH: 75.0}

    def fake_run(suite, workdir, threads):
        return [_phased(engine, 1, 8, rates[engine], {}) for engine in suite.engines]

    monkeypatch.setattr(run, "run_suite", fake_run)
    monkeypatch.setattr("triton_kit.benchmarks.nmt.matrix.copy_models", lambda *a: None)
    output = tmp_path / "nmt_rnn.md"
    argv = ["--architecture", "rnn", "--beams", "1", "--concurrency", "8"]
    run.main([*argv, "--torch-generate-sizes", "tiny", "--output", str(output)])
    text = output.read_text()
    ratio_headers, ratios = _tables_with_rows(text)[1]
    assert ratio_headers[-1] == "RNN TorchScript search / Python search, served"
    assert ratios[0][-1] == "1.50"
    assert "once per generated token" not in text
    assert "inside its stub" in text


def test_the_ct2_text_build_is_judged_against_ct2_int8_and_nmt_ct2_direct():
    """--ct2-text-sizes: the text model's twin is CTranslate2 int8; its bare-client cell is
    compared with CTranslate2 int8 and with nmt_ct2 direct (the same client stack)."""
    from triton_kit.benchmarks.nmt.architectures import BENCHMARKED, VARIANTS
    from triton_kit.benchmarks.nmt.run import parse_args

    rates = {**BASE, report.TRITON_CT2: 60.0, report.TRITON_CT2_DIRECT: 80.0}
    rates |= {report.TRITON_CT2_TEXT: 70.0, report.TRITON_CT2_TEXT_RAW: 88.0}
    text = report._pivot(_cells(rates), markdown_table)
    values = dict(zip(_tables(text)[0], text.splitlines()[2].strip("|").split("|"), strict=True))
    values = {key: value.strip() for key, value in values.items()}
    assert values["Triton ct2 text / CT2 int8"] == "0.70"
    assert values["ct2 text raw / CT2 int8"] == "0.88"
    assert values["ct2 text raw / nmt_ct2 direct"] == "1.10"
    assert "ct2-text" in BENCHMARKED["transformer"].variants
    assert "ct2-text" not in BENCHMARKED["rnn"].variants
    assert VARIANTS["ct2-text"].build_args[-1] == "--ct2-text"
    assert parse_args([]).ct2_text_sizes == ""
