"""triton_kit.loadtest.tune.summary on hand-made Model Analyzer CSVs (the header is 1.58's
export)."""

from __future__ import annotations

import pytest

from triton_kit.loadtest.tune.errors import TuneError
from triton_kit.loadtest.tune.summary import CHOSEN, RUNNER_UP, summarise

HEADER = (
    "Model,Batch,Concurrency,Model Config Path,Instance Group,Max Batch Size,"
    "Satisfies Constraints,Throughput (infer/sec),Avg Latency (ms),p90 Latency (ms),"
    "p99 Latency (ms)\n"
)


def csv_of(*rows: str) -> str:
    return HEADER + "".join(row + "\n" for row in rows)


def row(config: str, concurrency: int, throughput: float, p99: float, model: str = "m") -> str:
    return f"{model},1,{concurrency},{config},1:CPU,16,Yes,{throughput},{p99 / 2},{p99 * 0.9},{p99}"


def test_the_highest_throughput_within_the_slo_wins_at_its_best_concurrency() -> None:
    text = csv_of(
        row("m_config_default", 1, 10, 50),
        row("m_config_default", 4, 20, 150),  # over the SLO: not this config's best
        row("m_config_0", 1, 12, 60),
        row("m_config_0", 4, 30, 95),
        row("m_config_1", 1, 25, 130),  # never within
    )
    result = summarise(text, slo_p99_ms=100)["m"]
    assert result.chosen is not None and result.chosen.config == "m_config_0"
    assert result.chosen.best is not None
    assert (result.chosen.best.concurrency, result.chosen.best.throughput) == (4, 30)
    assert result.runner_up is not None and result.runner_up.config == "m_config_default"
    assert result.runner_up.verdict == f"{RUNNER_UP}; lower throughput: 10 vs 30 infer/s"
    loser = result.configs[-1]
    assert loser.config == "m_config_1"
    assert loser.verdict == "over the SLO: best p99 130 ms > 100 ms (concurrency 1)"
    assert result.failure() is None


def test_a_throughput_tie_goes_to_the_lower_p99() -> None:
    text = csv_of(row("m_config_0", 2, 20, 90), row("m_config_1", 2, 20, 70))
    result = summarise(text, slo_p99_ms=100)["m"]
    assert [c.config for c in result.configs] == ["m_config_1", "m_config_0"]
    assert result.configs[1].verdict.endswith("same throughput, higher p99: 90 vs 70 ms")


def test_a_full_tie_keeps_the_config_as_built() -> None:
    text = csv_of(row("m_config_0", 2, 20, 70), row("m_config_default", 2, 20, 70))
    result = summarise(text, slo_p99_ms=100)["m"]
    assert result.chosen is not None and result.chosen.is_default
    assert "config as built, which needs no change" in result.configs[1].verdict


def test_a_full_tie_between_variants_is_decided_by_name() -> None:
    text = csv_of(row("m_config_1", 2, 20, 70), row("m_config_0", 2, 20, 70))
    result = summarise(text, slo_p99_ms=100)["m"]
    assert [c.config for c in result.configs] == ["m_config_0", "m_config_1"]
    assert (
        result.configs[1].verdict == f"{RUNNER_UP}; tie with m_config_0, which comes first by name"
    )


def test_nothing_within_the_slo_chooses_nothing_and_names_the_best_p99_seen() -> None:
    text = csv_of(
        row("m_config_default", 1, 10, 140),
        row("m_config_0", 1, 12, 120),
        row("m_config_0", 4, 30, 300),
    )
    result = summarise(text, slo_p99_ms=100)["m"]
    assert result.chosen is None and result.runner_up is None
    assert result.failure() == (
        "m: no config serves within p99 <= 100 ms; the best p99 seen was 120 ms "
        "(m_config_0 at concurrency 1, 12 infer/s)"
    )
    assert all(c.verdict.startswith("over the SLO") for c in result.configs)


def test_min_throughput_rules_out_slow_configs_within_the_slo() -> None:
    text = csv_of(row("m_config_default", 1, 10, 50), row("m_config_0", 1, 30, 60))
    result = summarise(text, slo_p99_ms=100, min_throughput=20)["m"]
    assert result.chosen is not None and result.chosen.config == "m_config_0"
    assert result.configs[1].verdict == ("below --min-throughput: 10 < 20 infer/s within the SLO")
    nothing = summarise(text, slo_p99_ms=100, min_throughput=50)["m"]
    assert nothing.chosen is None
    assert "at >= 50 infer/s" in (nothing.failure() or "")


def test_a_row_missing_a_metric_is_left_out_and_noted() -> None:
    text = csv_of(
        row("m_config_default", 1, 10, 50),
        "m,1,4,m_config_0,2:CPU,16,Yes,40,,,",  # p99 missing: must not win on throughput
    )
    result = summarise(text, slo_p99_ms=100)["m"]
    assert result.chosen is not None and result.chosen.config == "m_config_default"
    assert [c.config for c in result.configs] == ["m_config_default"]
    assert result.skipped_rows == ("line 3 (m_config_0): no p99 Latency (ms)",)


def test_a_missing_column_is_an_error_naming_it() -> None:
    text = HEADER.replace(",p99 Latency (ms)", "") + "m,1,1,m_config_0,1:CPU,16,Yes,1,1,1\n"
    with pytest.raises(TuneError, match=r"lacks the columns \['p99 Latency \(ms\)'\]"):
        summarise(text, slo_p99_ms=100)


def test_models_are_summarised_apart_and_optional_columns_parse() -> None:
    text = csv_of(row("a_config_default", 1, 10, 50, "a"), row("b_config_default", 1, 5, 500, "b"))
    results = summarise(text, slo_p99_ms=100)
    assert results["a"].chosen is not None and results["b"].chosen is None
    best = results["a"].configs[0].best
    assert best is not None and (best.avg_ms, best.p90_ms) == (25, 45)
    assert results["a"].configs[0].verdict == CHOSEN
