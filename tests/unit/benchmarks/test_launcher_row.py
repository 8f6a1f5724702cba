"""The launcher row's pieces that need no server: what the bare command passes, and how
rounds become a ratio."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_kit.benchmarks import launcher


def test_bare_command_passes_only_repository_backends_and_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Installation:
        binary = Path("/opt/tritonserver")

    monkeypatch.setattr("triton_kit.server.binary.find_installation", lambda: Installation)
    command = launcher.bare_command(tmp_path, tmp_path / "b", [1, 2, 3])
    assert command[0] == "/opt/tritonserver"
    assert sorted(arg.split("=")[0] for arg in command[1:]) == [
        "--backend-directory", "--grpc-port", "--http-port", "--metrics-port",
        "--model-repository",
    ]  # fmt: skip


def test_launcher_command_keeps_the_default_flags(tmp_path: Path) -> None:
    command = launcher.launcher_command(tmp_path, [1, 2, 3], tmp_path / "log")
    assert command[1:4] == ["-m", "triton_kit.server", "serve"]
    assert "--latency-summaries" not in command


def test_ratio_is_of_medians_and_absent_without_a_good_round() -> None:
    rows = {
        "bare": [{"items_per_s": 100.0}, {"items_per_s": 120.0}, {"error": "x"}],
        "launcher": [{"items_per_s": 99.0}, {"items_per_s": 121.0}],
    }
    summary = launcher.summarise(rows)
    assert summary["median_items_per_s"] == {"bare": 110.0, "launcher": 110.0}
    assert summary["launcher_over_bare"] == pytest.approx(1.0)
    assert (
        launcher.summarise({"bare": [{"error": "x"}], "launcher": rows["launcher"]})[
            "launcher_over_bare"
        ]
        is None
    )


def test_report_names_every_round_and_the_ratio() -> None:
    rows = {
        "bare": [{"items_per_s": 100.0, "p50": 1.0, "p95": 2.0, "p99": 3.0}, {"error": "x"}],
        "launcher": [{"items_per_s": 99.0, "p50": 1.1, "p95": 2.1, "p99": 3.1, "retried": True},
                     {"items_per_s": 101.0, "p50": 1.0, "p95": 2.0, "p99": 3.0}],
    }  # fmt: skip
    result = {"model": "tiny", "concurrency": 8, **launcher.summarise(rows)}
    text = launcher.report(result, header="# H\n")
    assert text.startswith("# H\n")
    assert "| bare | 1 | 100 | 1.00 | 2.00 | 3.00 |" in text
    assert "| bare | 2 | error: x |" in text
    assert "| launcher | 1 | 99 | 1.10 | 2.10 | 3.10 | yes |" in text
    assert "**launcher / bare = 1.00**" in text
    assert "Medians: bare 100, launcher 100 items/s." in text  # not 100.0 or 110.00000001
    assert "Each round, launcher / bare: 0.99, none." in text  # round 2's bare failed
    assert "tiny" in text and "c8" in text


def test_rounds_take_turns_at_which_server_goes_first() -> None:
    """Session 47 (H200): the launcher led bare tritonserver in all four rounds, 1.04-1.07x,
    and every round had served bare first. Whichever goes first in a round now alternates, so
    an order effect falls on both sides alike."""
    orders = [launcher.round_order(number) for number in range(4)]
    assert orders == [("bare", "launcher"), ("launcher", "bare")] * 2
