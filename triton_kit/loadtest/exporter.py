"""Locust's client-side view on ``/metrics`` for Prometheus, served by the master.

Locust exports no Prometheus metrics of its own, so Grafana could not put what the clients
saw beside what Triton counted. With ``--prometheus-port`` the master (or a single-process
run) serves, per request name (``<model> <task>``) and protocol: request and failure
counters (Grafana takes their ``rate``), the latency percentiles of Locust's sliding window
(about the last 10 s), and the running users. Workers serve nothing: their stats reach the
master, which sees them all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

QUANTILES = (0.5, 0.9, 0.99)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_HELP = {
    "locust_requests_total": ("counter", "Requests completed, failed ones included."),
    "locust_failures_total": ("counter", "Requests that failed."),
    "locust_response_time_seconds": (
        "summary",
        "Response time: quantiles over Locust's sliding window (about 10 s), sum and count "
        "since the start.",
    ),
    "locust_users": ("gauge", "Users running."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in pairs.items()) + "}"


def _entry_samples(entry: Any) -> Iterable[tuple[str, dict[str, str], float]]:
    labels = {"name": entry.name, "method": entry.method, "model": entry.name.split(" ", 1)[0]}
    yield "locust_requests_total", labels, float(entry.num_requests)
    yield "locust_failures_total", labels, float(entry.num_failures)
    yield "locust_response_time_seconds_sum", labels, entry.total_response_time / 1000.0
    yield "locust_response_time_seconds_count", labels, float(entry.num_requests)
    if not entry.use_response_times_cache:
        return
    for quantile in QUANTILES:
        milliseconds = entry.get_current_response_time_percentile(quantile)
        if milliseconds is not None:
            yield (
                "locust_response_time_seconds",
                {**labels, "quantile": f"{quantile:g}"},
                milliseconds / 1000.0,
            )


def render(environment: Any) -> str:
    """The Prometheus text exposition of ``environment``'s stats, one family at a time."""
    samples: list[tuple[str, dict[str, str], float]] = []
    for entry in list(environment.stats.entries.values()):
        samples += _entry_samples(entry)
    runner = environment.runner
    samples.append(("locust_users", {}, float(runner.user_count if runner else 0)))
    lines = []
    for family, (kind, text) in _HELP.items():
        lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}"]
        lines += [
            f"{name}{_labels(lab)} {value:g}"
            for name, lab, value in samples
            if name in (family, f"{family}_sum", f"{family}_count")
        ]
    return "\n".join(lines) + "\n"


def wsgi_app(environment: Any) -> Callable[..., list[bytes]]:
    def app(env: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if env.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"only /metrics here\n"]
        body = render(environment).encode()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
        return [body]

    return app


def start(environment: Any, host: str, port: int) -> Any:
    """Serve in the master's gevent hub; stopped when Locust quits."""
    from gevent.pywsgi import WSGIServer

    server = WSGIServer((host, port), wsgi_app(environment), log=None)
    server.start()
    logger.info("Locust metrics for Prometheus on http://%s:%d/metrics", host, server.server_port)
    environment.events.quitting.add_listener(lambda **_: server.stop(timeout=1))
    return server
