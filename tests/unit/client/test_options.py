"""triton_kit.client.options and client.retry without a server (fast: mutation runs).

Expected values restate the documented defaults and rules (docs/CLIENT.md, the classes'
docstrings): full-jitter backoff bounds ``min(max_backoff, backoff * 2**n)``, retries only
of retryable errors and never past the deadline.
"""

from __future__ import annotations

import random
import time

import pytest

from triton_kit.client.errors import ConfigurationError, InvalidInputError, ServerConnectionError
from triton_kit.client.options import TLS, ClientOptions, Retry
from triton_kit.client.retry import RetryLoop
from triton_kit.client.types import Timeout


class TopOfRange(random.Random):
    """A real Random that answers every ``uniform(a, b)`` with ``b`` and records the range."""

    def __init__(self) -> None:
        super().__init__(0)
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.ranges.append((a, b))
        return b


def test_retry_defaults_and_shorthands() -> None:
    assert (Retry().attempts, Retry().backoff, Retry().max_backoff) == (3, 0.05, 1.0)
    assert Retry.off() == Retry(attempts=1, backoff=0.05, max_backoff=1.0)
    assert Retry.of(None) == Retry()
    given = Retry(attempts=7)
    assert Retry.of(given) is given
    assert Retry.of(0) == Retry(attempts=1)
    assert Retry.of(2) == Retry(attempts=3)
    assert Retry.of(2.0) == Retry(attempts=3)


@pytest.mark.parametrize(
    "kwargs", [{"attempts": 0}, {"backoff": -0.01}, {"max_backoff": -1.0}, {"attempts": -3}]
)
def test_invalid_retry_policies_are_refused(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError, match="attempts >= 1, delays >= 0") as caught:
        Retry(**kwargs)
    assert str(caught.value).startswith("invalid retry policy Retry(")


def test_the_smallest_valid_policy() -> None:
    assert Retry(attempts=1, backoff=0.0, max_backoff=0.0).attempts == 1


def test_delays_double_from_backoff_up_to_max_backoff() -> None:
    rng = TopOfRange()
    delays = list(Retry(attempts=6, backoff=0.1, max_backoff=0.5).delays(rng))
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    assert [low for low, _ in rng.ranges] == [0.0] * 5
    assert [high for _, high in rng.ranges] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    assert list(Retry.off().delays(TopOfRange())) == []


def test_delays_without_a_generator_are_random_within_the_bounds() -> None:
    delays = list(Retry(attempts=200, backoff=0.001, max_backoff=0.004).delays())
    assert len(delays) == 199
    assert delays[0] <= 0.001 and all(0.0 <= d <= 0.004 for d in delays)
    assert len(set(delays)) > 150, "full jitter: each wait drawn afresh"


def test_tls_defaults() -> None:
    tls = TLS()
    assert (tls.ca_file, tls.cert_file, tls.key_file, tls.insecure) == (None, None, None, False)


def test_client_option_defaults() -> None:
    options = ClientOptions()
    assert options.timeout == Timeout(request=60.0, connect=10.0)
    assert options.max_concurrency == 16
    assert dict(options.models) == {
        "classify": "resnet50",
        "classify_uint8": "resnet50_uint8",  # decoded images (numpy arrays, PIL)
        "embed": "bert",
        "translate": "nmt",
    }
    assert dict(options.versions) == {} and dict(options.headers) == {}
    assert options.retry == Retry(attempts=3, backoff=0.05, max_backoff=1.0)
    assert options.tls is None and options.compression is None
    assert options.shared_memory is None
    assert options.shared_memory_threshold == 1024 * 1024
    assert options.cuda_device == 0 and options.api_key is None
    assert options.models is not ClientOptions().models, "each client has its own mapping"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
        ({"max_concurrency": -2}, "max_concurrency must be >= 1, got -2"),
        (
            {"compression": "br"},
            "compression must be one of ('gzip', 'deflate') or None, got 'br'",
        ),
        ({"compression": ""}, "compression must be one of ('gzip', 'deflate') or None, got ''"),
        ({"shared_memory": "gpu"}, "shared_memory must be 'system', 'cuda' or None, got 'gpu'"),
        ({"shared_memory_threshold": -1}, "shared_memory_threshold must be >= 0 bytes"),
    ],
)
def test_invalid_options_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        ClientOptions(**kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_concurrency": 1},
        {"compression": "gzip"},
        {"compression": "deflate"},
        {"shared_memory": "system"},
        {"shared_memory": "cuda"},
        {"shared_memory_threshold": 0},
    ],
)
def test_edge_values_are_accepted(kwargs: dict) -> None:
    options = ClientOptions(**kwargs)
    for key, value in kwargs.items():
        assert getattr(options, key) == value


def test_version_of_a_pinned_and_an_unpinned_model() -> None:
    options = ClientOptions(versions={"bert": 2, "nmt": "1"})  # type: ignore[dict-item]
    assert options.version_of("bert") == "2"
    assert options.version_of("nmt") == "1"
    assert options.version_of("resnet50") == ""


# ---- the retry loop ----------------------------------------------------------------------

REFUSED = ServerConnectionError("refused", reason="connection_refused")
QUICK = Retry(attempts=3, backoff=0.0, max_backoff=0.0)  # every wait is 0 s


def test_remaining_time() -> None:
    assert RetryLoop(QUICK, None).remaining() is None
    left = RetryLoop(QUICK, 30.0).remaining()
    assert left is not None and 29.0 < left <= 30.0
    assert RetryLoop(QUICK, 0.0).remaining() == 0.001  # never below 1 ms
    past = RetryLoop(QUICK, 0.01)
    time.sleep(0.02)
    assert past.remaining() == 0.001


def test_retryable_errors_are_retried_until_the_attempts_run_out() -> None:
    loop = RetryLoop(QUICK, None)
    assert loop.attempt == 1
    assert loop.next_delay(REFUSED) == 0.0
    assert loop.attempt == 2
    assert loop.next_delay(REFUSED) == 0.0
    assert loop.attempt == 3
    assert loop.next_delay(REFUSED) is None
    assert loop.attempt == 3


def test_waits_follow_the_policy() -> None:
    loop = RetryLoop(Retry(attempts=2, backoff=0.002, max_backoff=0.002), 30.0)
    delay = loop.next_delay(REFUSED)
    assert delay is not None and 0.0 <= delay <= 0.002


def test_other_errors_and_a_disabled_loop_give_up_at_once() -> None:
    loop = RetryLoop(QUICK, None)
    assert loop.next_delay(InvalidInputError("bad")) is None
    assert loop.next_delay(ServerConnectionError("x", reason="dns")) is None
    assert loop.attempt == 1
    off = RetryLoop(QUICK, None, enabled=False)
    assert off.next_delay(REFUSED) is None and off.attempt == 1


def test_no_retry_once_the_deadline_is_spent() -> None:
    spent = RetryLoop(QUICK, 0.0005)  # less than the 1 ms margin is left
    assert spent.next_delay(REFUSED) is None and spent.attempt == 1
    roomy = RetryLoop(QUICK, 0.5)
    assert roomy.next_delay(REFUSED) == 0.0 and roomy.attempt == 2
    late = RetryLoop(QUICK, 0.01)
    time.sleep(0.02)
    assert late.next_delay(REFUSED) is None
