"""Sub-millisecond percentiles in Locust's own statistics.

Locust keys its response-time histogram by ``locust.stats.bucket_response_time``, which
rounds anything under 100 ms to whole milliseconds: a 0.4 ms and a 1.4 ms model look the
same. Replacing that function (on master and workers: both import this module through the
locustfile) keeps 0.1 ms under 100 ms and three significant digits above. Locust's CSV
writer and console table cast percentiles to ``int``; both are patched to keep one decimal.

The headless runner does not depend on this: it records every sample itself.
"""

from __future__ import annotations

import locust.stats

RESOLUTION_MS = 0.1


def fine_bucket(response_time: float) -> float:
    """0.1 ms below 100 ms, then three significant digits (~700 keys per entry at most)."""
    if response_time < 100:
        return round(response_time, 1)
    if response_time < 1000:
        return float(round(response_time))
    if response_time < 10000:
        return float(round(response_time, -1))
    return float(round(response_time, -2))


def _percentile_fields(self, stats_entry, use_current: bool = False):
    """Locust's ``StatsCSV._percentile_fields`` without the cast to int."""
    if not stats_entry.num_requests:
        return self.percentiles_na
    if use_current and stats_entry.use_response_times_cache:
        get = stats_entry.get_current_response_time_percentile
    else:
        get = stats_entry.get_response_time_percentile
    return [round(get(p) or 0, 1) for p in self.percentiles_to_report]


def _percentile_row(self) -> str:
    """Locust's console percentile row (``StatsEntry.percentile``) with one decimal."""
    if not self.num_requests:
        raise ValueError("Can't calculate percentile on url with no successful requests")
    stats = locust.stats
    first, *rest = (self.get_response_time_percentile(p) for p in stats.PERCENTILES_TO_REPORT)
    head = f"{self.method or '':<{stats.STATS_TYPE_WIDTH}} {self.name:<{stats.STATS_NAME_WIDTH}}"
    values = " ".join(f"{value:6.1f}" for value in rest)
    return f"{head} {first:8.1f} {values} {self.num_requests:6d}"


def install() -> None:
    """Idempotent; call at import time of the locustfile, before any request is logged."""
    locust.stats.bucket_response_time = fine_bucket
    locust.stats.StatsCSV._percentile_fields = _percentile_fields
    locust.stats.StatsEntry.percentile = _percentile_row
