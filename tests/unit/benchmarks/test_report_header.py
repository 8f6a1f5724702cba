"""Every benchmark report opens with the same head: machine, load, command, date, commit."""

from __future__ import annotations

from triton_kit.benchmarks.harness.measure import report_header, runs_table


def test_the_header_names_one_run_in_a_table() -> None:
    text = report_header(
        "X benchmark", command="python -m triton_kit.benchmarks.x", load="idle", machine="M",
        date="D", commit="abc1234",
    )  # fmt: skip
    assert text.splitlines() == [
        "# X benchmark",
        "",
        "| run |  |",
        "|---|---|",
        "| machine | M |",
        "| load | idle |",
        "| command | `python -m triton_kit.benchmarks.x` |",
        "| date | D |",
        "| commit | `abc1234` |",
    ]


def test_the_defaults_describe_the_run_writing_it() -> None:
    text = report_header("X", command="c", load="l")
    assert " UTC |" in text and "cores" in text and "| commit | `" in text


def test_sections_from_different_runs_are_named_in_one_table() -> None:
    text = runs_table([("tiny", "2026-11-24", "2 cores", "abc"), ("large", "D", "H", "def")])
    assert text.splitlines() == [
        "| section | run date | host | commit |",
        "|---|---|---|---|",
        "| tiny | 2026-11-24 | 2 cores | `abc` |",
        "| large | D | H | `def` |",
    ]


def test_a_copy_without_git_takes_the_commit_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_KIT_COMMIT", "1234abc")
    assert "| commit | `1234abc` |" in report_header("X", command="c", load="l")
