"""The queue policy dynamically batched models get: defined once, written by the build.

A bounded queue (``max_queue_size``, a default timeout that rejects, client deadlines
honoured through ``allow_timeout_override``) turns excess work away at once (UNAVAILABLE,
"Exceeds maximum queue size" / "Request timeout expired") instead of queueing it forever.

**Off by default on Triton 2.51.** Any of those fields turns off the dynamic batcher's
prefetching (``PriorityQueue::SupportPrefetching`` in Triton core); a request that
arrives while the only instance is still finishing an execute then waits for the
batcher's 500 ms poll, because nothing wakes it when the instance becomes free (later
Triton releases wake it). Measured on 2 quiet cores with the policy on, at concurrency 1:
``resnet50_model`` p95 534 ms (p50 33 ms) and 0.38x in-process throughput, 0.81x at
saturation; without it p95 35 ms, 0.88x and 0.96x (``benchmarks/results/resnet50.md``); ``nmt``
133-173 ms mean queue time per request (``benchmarks/results/nmt.md``). With prefetching on, what
bounds work is each model's per-request limits (image pixels, text bytes,
``max_beam_tokens``); a client's deadline ends its call, but Triton no longer drops a
queued request whose deadline passed, so under overload the queue grows.
``BOUNDED_QUEUE_POLICY`` is what
``python -m triton_kit.build_engines FAMILY --queue-policy bounded`` writes into every
dynamically batched model (``--max-queue-size`` and ``--queue-timeout-ms`` change its
numbers): for a Triton without that stall, or where rejecting fast matters more than latency
at low load. ``tests/integration/reliability/test_overload.py`` shows what it does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueuePolicy:
    """Triton's ``dynamic_batching.default_queue_policy`` plus ``max_queue_size``; all zero
    (``off``) writes no policy, which keeps Triton's prefetching on."""

    max_queue_size: int = 0
    # A queued request that has not started after this long is rejected.
    default_timeout_us: int = 0
    # Lets a client's own deadline (tritonclient's ``timeout=``, microseconds) reach the queue.
    allow_timeout_override: bool = False

    @property
    def off(self) -> bool:
        return not (self.max_queue_size or self.default_timeout_us or self.allow_timeout_override)


# 5 s: NMT beam batches take seconds on 2 CPU cores; clients can ask for less.
BOUNDED_QUEUE_POLICY = QueuePolicy(128, 5_000_000, True)
DEFAULT_QUEUE_POLICY = QueuePolicy()  # off: see the module docstring
