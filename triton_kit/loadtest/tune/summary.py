"""Model Analyzer's exported inference CSV to a typed choice per model (pure code).

Each config was measured at several concurrencies. A config's best measurement is the one
with the highest throughput whose p99 is within the SLO (and whose throughput reaches the
minimum); the chosen config is the one whose best measurement is highest, ties going to
the lower p99, then to the config as built (no change beats an equal change), then by name.
Every other config gets the reason it lost. A row that lacks a metric is left out and noted.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from triton_kit.loadtest.tune.errors import TuneError

# Model Analyzer's column headers for the fields loadtest.tune.config asks it to export.
MODEL = "Model"
CONFIG = "Model Config Path"
CONCURRENCY = "Concurrency"
THROUGHPUT = "Throughput (infer/sec)"
P99 = "p99 Latency (ms)"
P90 = "p90 Latency (ms)"
AVG = "Avg Latency (ms)"
INSTANCES = "Instance Group"
MAX_BATCH = "Max Batch Size"
REQUIRED = (MODEL, CONFIG, CONCURRENCY, THROUGHPUT, P99)
DEFAULT_SUFFIX = "_config_default"

CHOSEN = "chosen"
RUNNER_UP = "runner-up"


@dataclass(frozen=True)
class Measurement:
    """One config at one concurrency, as perf_analyzer measured it."""

    config: str
    concurrency: int
    throughput: float
    p99_ms: float
    model: str = ""
    p90_ms: float | None = None
    avg_ms: float | None = None
    instance_group: str = ""
    max_batch_size: str = ""


@dataclass(frozen=True)
class ConfigResult:
    """A config, its best measurement within the limits (None: none), and its verdict."""

    config: str
    measurements: tuple[Measurement, ...]
    best: Measurement | None
    verdict: str = ""

    @property
    def lowest_p99(self) -> Measurement:
        return min(self.measurements, key=lambda m: (m.p99_ms, -m.throughput))

    @property
    def is_default(self) -> bool:
        return self.config.endswith(DEFAULT_SUFFIX)


@dataclass(frozen=True)
class ModelSummary:
    """The choice for one model: ``configs`` holds the chosen one first, then the rest ranked."""

    model: str
    slo_p99_ms: float
    min_throughput: float
    configs: tuple[ConfigResult, ...]
    skipped_rows: tuple[str, ...] = ()

    @property
    def chosen(self) -> ConfigResult | None:
        first = self.configs[0] if self.configs else None
        return first if first is not None and first.verdict == CHOSEN else None

    @property
    def runner_up(self) -> ConfigResult | None:
        second = self.configs[1] if self.chosen is not None and len(self.configs) > 1 else None
        return second if second is not None and second.best is not None else None

    @property
    def default(self) -> ConfigResult | None:
        return next((c for c in self.configs if c.is_default), None)

    @property
    def best_p99_seen(self) -> Measurement | None:
        seen = [c.lowest_p99 for c in self.configs]
        return min(seen, key=lambda m: m.p99_ms) if seen else None

    def failure(self) -> str | None:
        """Why no config was chosen, with the best p99 seen; None when one was."""
        if self.chosen is not None:
            return None
        seen = self.best_p99_seen
        if seen is None:
            return f"{self.model}: Model Analyzer measured nothing usable"
        limit = f"p99 <= {self.slo_p99_ms:g} ms"
        if self.min_throughput:
            limit += f" at >= {self.min_throughput:g} infer/s"
        return (
            f"{self.model}: no config serves within {limit}; the best p99 seen was "
            f"{seen.p99_ms:g} ms ({seen.config} at concurrency {seen.concurrency}, "
            f"{seen.throughput:g} infer/s)"
        )


def parse_rows(text: str) -> tuple[list[Measurement], list[str]]:
    """Measurements from the CSV, and a note per row left out for a missing metric."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise TuneError(f"Model Analyzer's CSV lacks the columns {missing}")
    rows, skipped = [], []
    for number, row in enumerate(reader, start=2):
        try:
            rows.append(_measurement(row))
        except ValueError:
            empty = [c for c in REQUIRED if not (row.get(c) or "").strip()]
            skipped.append(f"line {number} ({row.get(CONFIG) or '?'}): no {', '.join(empty)}")
    return rows, skipped


def _measurement(row: dict[str, str]) -> Measurement:
    return Measurement(
        config=_text(row[CONFIG]),
        concurrency=int(row[CONCURRENCY]),
        throughput=float(row[THROUGHPUT]),
        p99_ms=float(row[P99]),
        model=_text(row[MODEL]),
        p90_ms=_optional(row.get(P90)),
        avg_ms=_optional(row.get(AVG)),
        instance_group=(row.get(INSTANCES) or "").strip(),
        max_batch_size=(row.get(MAX_BATCH) or "").strip(),
    )


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("empty")
    return value.strip()


def _optional(value: str | None) -> float | None:
    return float(value) if value and value.strip() else None


def summarise(text: str, slo_p99_ms: float, min_throughput: float = 0.0) -> dict[str, ModelSummary]:
    """Per model in the CSV, the chosen config and why each other one lost."""
    rows, skipped = parse_rows(text)
    by_model: dict[str, list[Measurement]] = defaultdict(list)
    for row in rows:
        by_model[row.model].append(row)
    return {
        model: choose(model, measurements, slo_p99_ms, min_throughput, tuple(skipped))
        for model, measurements in by_model.items()
    }


def choose(
    model: str,
    measurements: Iterable[Measurement],
    slo_p99_ms: float,
    min_throughput: float = 0.0,
    skipped_rows: tuple[str, ...] = (),
) -> ModelSummary:
    by_config: dict[str, list[Measurement]] = defaultdict(list)
    for m in measurements:
        by_config[m.config].append(m)
    results = [
        ConfigResult(name, tuple(ms), _best(ms, slo_p99_ms, min_throughput))
        for name, ms in sorted(by_config.items())
    ]
    ranked = sorted((r for r in results if r.best is not None), key=_rank)
    losers = sorted((r for r in results if r.best is None), key=lambda r: r.lowest_p99.p99_ms)
    judged = []
    for index, result in enumerate(ranked):
        verdict = CHOSEN if index == 0 else RUNNER_UP if index == 1 else ""
        if index > 0:
            verdict = _lower(result, ranked[0], verdict)
        judged.append(_with(result, verdict))
    judged += [_with(r, _over(r, slo_p99_ms, min_throughput)) for r in losers]
    return ModelSummary(model, slo_p99_ms, min_throughput, tuple(judged), skipped_rows)


def _best(ms: list[Measurement], slo: float, floor: float) -> Measurement | None:
    within = [m for m in ms if m.p99_ms <= slo and m.throughput >= floor]
    return min(within, key=lambda m: (-m.throughput, m.p99_ms, m.concurrency), default=None)


def _rank(result: ConfigResult) -> tuple:
    best = result.best
    assert best is not None
    return (-best.throughput, best.p99_ms, not result.is_default, result.config)


def _with(result: ConfigResult, verdict: str) -> ConfigResult:
    return ConfigResult(result.config, result.measurements, result.best, verdict)


def _lower(result: ConfigResult, winner: ConfigResult, label: str) -> str:
    mine, theirs = result.best, winner.best
    assert mine is not None and theirs is not None
    if mine.throughput < theirs.throughput:
        why = f"lower throughput: {mine.throughput:g} vs {theirs.throughput:g} infer/s"
    elif mine.p99_ms > theirs.p99_ms:
        why = f"same throughput, higher p99: {mine.p99_ms:g} vs {theirs.p99_ms:g} ms"
    elif winner.is_default and not result.is_default:
        why = "same throughput and p99 as the config as built, which needs no change"
    else:
        why = f"tie with {winner.config}, which comes first by name"
    return f"{label}; {why}" if label else why


def _over(result: ConfigResult, slo: float, floor: float) -> str:
    fastest = result.lowest_p99
    if fastest.p99_ms > slo:
        return (
            f"over the SLO: best p99 {fastest.p99_ms:g} ms > {slo:g} ms "
            f"(concurrency {fastest.concurrency})"
        )
    top = max((m for m in result.measurements if m.p99_ms <= slo), key=lambda m: m.throughput)
    return f"below --min-throughput: {top.throughput:g} < {floor:g} infer/s within the SLO"
