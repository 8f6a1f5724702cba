"""Server-side time per model from Triton's statistics API, as deltas over a window.

Triton keeps cumulative counters per model: requests, time queued, time computing
(input, infer, output). Two snapshots bracket a load step; their difference says whether
latency was spent waiting in the queue or computing, which the client cannot see.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from triton_kit.client.transport import Endpoint

_FIELDS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class ModelCounters:
    """Cumulative counters of one model (ns and counts), as Triton reports them."""

    success_count: int = 0
    success_ns: int = 0
    fail_count: int = 0
    queue_ns: int = 0
    compute_input_ns: int = 0
    compute_infer_ns: int = 0
    compute_output_ns: int = 0
    execution_count: int = 0
    inference_count: int = 0  # items: a request of N rows counts N (BLS calls carry batches)

    def minus(self, other: ModelCounters) -> ModelCounters:
        mine, theirs = asdict(self), asdict(other)
        return ModelCounters(**{key: mine[key] - theirs[key] for key in mine})


def _duration(stats: dict[str, Any], name: str) -> tuple[int, int]:
    entry = stats.get(name) or {}
    return int(entry.get("count", 0)), int(entry.get("ns", 0))


def parse_model_stats(payload: dict[str, Any]) -> dict[str, ModelCounters]:
    """Both protocols' JSON (gRPC gives uint64 as strings) to counters keyed by model name."""
    result: dict[str, ModelCounters] = {}
    for model in payload.get("model_stats", []):
        stats = model.get("inference_stats", {})
        durations = {name: _duration(stats, name) for name in _FIELDS}
        counters = ModelCounters(
            success_count=durations["success"][0],
            success_ns=durations["success"][1],
            fail_count=durations["fail"][0],
            queue_ns=durations["queue"][1],
            compute_input_ns=durations["compute_input"][1],
            compute_infer_ns=durations["compute_infer"][1],
            compute_output_ns=durations["compute_output"][1],
            execution_count=int(model.get("execution_count", 0)),
            inference_count=int(model.get("inference_count", 0)),
        )
        name = model["name"]
        # Several versions of one model: add them up.
        previous = result.get(name)
        if previous is not None:
            counters = ModelCounters(
                **{k: v + asdict(previous)[k] for k, v in asdict(counters).items()}
            )
        result[name] = counters
    return result


class StatsProbe:
    """Reads every model's counters over the same protocol the users speak."""

    def __init__(self, url: str) -> None:
        self.endpoint = Endpoint.parse(url)
        self._client: Any = None

    def _connect(self) -> Any:
        if self._client is None:
            if self.endpoint.protocol == "grpc":
                import tritonclient.grpc as module
            else:
                import tritonclient.http as module
            self._client = module.InferenceServerClient(
                self.endpoint.address, ssl=self.endpoint.ssl
            )
        return self._client

    def snapshot(self) -> dict[str, ModelCounters]:
        client = self._connect()
        if self.endpoint.protocol == "grpc":
            payload = client.get_inference_statistics(as_json=True)
        else:
            payload = client.get_inference_statistics()
        return parse_model_stats(payload)

    def platforms(self, names: list[str]) -> dict[str, str]:
        """Each model's platform or backend ("ensemble", "python", ...): how to read its stats."""
        client = self._connect()
        found = {}
        for name in names:
            if self.endpoint.protocol == "grpc":
                config = client.get_model_config(name, as_json=True).get("config", {})
            else:
                config = client.get_model_config(name)
            found[name] = config.get("platform") or config.get("backend") or ""
        return found

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def window(
    before: dict[str, ModelCounters], after: dict[str, ModelCounters]
) -> dict[str, ModelCounters]:
    """Per-model deltas; models that served nothing in the window are left out."""
    deltas = {}
    for name, counters in after.items():
        delta = counters.minus(before.get(name, ModelCounters()))
        if delta.success_count or delta.fail_count:
            deltas[name] = delta
    return deltas
