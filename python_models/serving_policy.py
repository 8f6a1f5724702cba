"""Queue policy every dynamically batched model gets: defined once, written by the build.

Without a bound, a model past capacity queues forever and p99 grows with the
client count. With it, Triton rejects work that cannot start within the
timeout (UNAVAILABLE, "Request timeout expired" / "Exceeds maximum queue size")
at once, so accepted requests keep a bounded latency and clients can back off.

Exception: ``nmt`` and ``nmt_rnn`` have no queue policy. In Triton 2.51 any policy field
turns off the dynamic batcher's prefetching (``PriorityQueue::SupportPrefetching``); a
request that arrives while the only instance still runs then waits for the batcher's
500 ms poll, and the search answers each request from inside its execute, so a lone
client's next request always arrives then (133-173 ms mean queue time at concurrency
1; ``tests/test_nmt_triton.py::test_a_lone_request_does_not_wait_in_the_queue``). Their
work per request is bounded instead (``max_beam_tokens``, ``max_text_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueuePolicy:
    """Triton's ``dynamic_batching.default_queue_policy`` plus ``max_queue_size``."""

    max_queue_size: int = 128
    # A queued request that has not started after this long is rejected (5 s: NMT beam
    # batches take seconds on 2 CPU cores; clients can ask for less, see below).
    default_timeout_us: int = 5_000_000
    # Lets a client's own deadline (tritonclient's ``timeout=``, microseconds) reach the queue.
    allow_timeout_override: bool = True


DEFAULT_QUEUE_POLICY = QueuePolicy()
