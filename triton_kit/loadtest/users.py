"""Locust users over the client SDK: an abstract ``TritonUser`` and one user per model family.

Each user owns one ``client.TritonClient`` (the HTTP client is not thread-safe). Over
gRPC the clients' calls go, by default, through the process's one sidecar
(``triton_kit.loadtest.sidecar.client``: a native, else asyncio, gRPC process fed over a socket
gevent waits on), because gRPC in the gevent process costs a native-thread handoff per
call; ``--grpc-transport gevent`` keeps gRPC in the process (``gevent_grpc``).
``TritonUser.call`` times an SDK call and fires ``events.request``; the concrete users
only pick payloads. Every client, and every sidecar, is closed when the test stops: an
open gRPC channel keeps the process alive after its summary under gevent.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from triton_kit.loadtest.reports import resolution
from triton_kit.loadtest.sidecar import gevent_grpc

gevent_grpc.init()  # before any in-process gRPC channel (--grpc-transport gevent)
resolution.install()

import gevent  # noqa: E402
from locust import User, constant, events, task  # noqa: E402
from locust.exception import LocustError  # noqa: E402

from triton_kit.client import Timeout, TritonClient  # noqa: E402
from triton_kit.client.options import FAMILY_METHODS  # noqa: E402
from triton_kit.client.transport import Endpoint  # noqa: E402
from triton_kit.loadtest import corpora  # noqa: E402
from triton_kit.loadtest.options import Weights, parse_pairs  # noqa: E402
from triton_kit.loadtest.sidecar import client as sidecar_client  # noqa: E402
from triton_kit.loadtest.weights import apply_weights  # noqa: E402

logger = logging.getLogger(__name__)
_open_clients: weakref.WeakSet[TritonClient] = weakref.WeakSet()
_availability: dict[tuple[str, str], bool] = {}
IDLE_SECONDS = 1.0


class TritonUser(User):
    """Times SDK calls and reports them to Locust; the protocol comes from ``--host``.

    ``grpc://host:8001`` or ``http://host:8000``. Subclasses set ``family`` (the SDK's
    model family) and hold only tasks that call :meth:`call`.
    """

    abstract = True
    wait_time = constant(0)
    family: ClassVar[str] = ""
    protocol: ClassVar[str | None] = None  # pinned by GrpcTritonUser / HttpTritonUser

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.url = self._url(self.host)
        self.endpoint = Endpoint.parse(self.url)
        options = environment.parsed_options
        names = parse_pairs(getattr(options, "model_name", []) or [])
        self.model = names.get(self.family, self.family)
        self.timeout = Timeout(request=getattr(options, "request_timeout", 60.0))
        self.client: TritonClient | None = None
        self.available = True

    @classmethod
    def _url(cls, host: str | None) -> str:
        if not host:
            raise LocustError(f"{cls.__name__} needs --host grpc://HOST:8001 or http://HOST:8000")
        if cls.protocol is None:
            return host
        if "://" not in host:
            return f"{cls.protocol}://{host}"
        if Endpoint.parse(host).protocol != cls.protocol:
            raise LocustError(f"{cls.__name__} speaks {cls.protocol}; --host is {host}")
        return host

    def on_start(self) -> None:
        method = FAMILY_METHODS.get(self.family)
        models = {method: self.model} if method else {}
        # No SDK retries: a load test counts every refused or overloaded request.
        self.client = TritonClient(
            self.url, timeout=self.timeout, models=models, retry=0, client_factory=self._factory()
        )
        _open_clients.add(self.client)
        self.available = self._model_available()

    def _factory(self) -> Any:
        """gRPC through this process's sidecar unless ``--grpc-transport gevent``."""
        options = self.environment.parsed_options
        if self.endpoint.protocol != "grpc":
            return None
        transport = getattr(options, "grpc_transport", "sidecar")
        if transport == "gevent":
            return None
        kind = {"sidecar-native": "native", "sidecar-python": "python"}.get(transport, "auto")
        return functools.partial(sidecar_client.factory, kind=kind)

    def on_stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def _model_available(self) -> bool:
        """Checked once per process and model; an absent model idles its users with one warning."""
        key = (self.url, self.model)
        if key not in _availability:
            assert self.client is not None
            if not self.client.server_ready():
                return True  # a down server is not a missing model: let the calls fail
            _availability[key] = self.client.model_ready(self.model)
            if not _availability[key]:
                logger.warning(
                    "model %r is not loaded on %s: %s is skipped (its users stay idle)",
                    self.model,
                    self.url,
                    type(self).__name__,
                )
        return _availability[key]

    def call(self, task_name: str, fn: Callable[[TritonClient], Any], size: int = 0) -> Any:
        """Run ``fn(client)`` timed; fire one request event named '<model> <task>'.

        ``size`` (bytes sent) fills Locust's size column; ``context`` carries the model for
        the recorder.
        """
        if not self.available or self.client is None:
            gevent.sleep(IDLE_SECONDS)
            return None
        result, exception = None, None
        start = time.perf_counter()
        try:
            result = fn(self.client)
        except Exception as exc:  # every SDK error counts as a failed request
            exception = exc
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        self.environment.events.request.fire(
            request_type=self.endpoint.protocol,
            name=f"{self.model} {task_name}",
            response_time=elapsed_ms,
            response_length=size,
            response=result,
            exception=exception,
            context={"model": self.model, "task": task_name},
        )
        return result


class GrpcTritonUser(TritonUser):
    """A TritonUser that always speaks gRPC (``--host`` may omit the scheme)."""

    abstract = True
    protocol = "grpc"


class HttpTritonUser(TritonUser):
    """A TritonUser that always speaks HTTP (``--host`` may omit the scheme)."""

    abstract = True
    protocol = "http"


def _seed(environment: Any) -> int:
    return getattr(environment.parsed_options, "corpus_seed", 0)


class _Corpus:
    """Corpora built once per process (image encoding takes a moment), shared by all users."""

    _cache: ClassVar[dict[tuple[str, int], list]] = {}

    @classmethod
    def get(cls, name: str, seed: int) -> list:
        key = (name, seed)
        if key not in cls._cache:
            builders: dict[str, Callable[[], list]] = {
                "small_images": lambda: corpora.images(24, corpora.SMALL_SIDES, seed),
                "large_images": lambda: corpora.images(12, corpora.LARGE_SIDES, seed + 1),
                "sentences": lambda: corpora.sentences(200, seed),
                "short_sentences": lambda: corpora.sentences(200, seed + 2, max_clauses=2),
                "numbers": lambda: corpora.number_phrases(200, seed),
            }
            cls._cache[key] = builders[name]()
        return cls._cache[key]


class ResNet50User(TritonUser):
    """Image classification: mostly thumbnails-to-photos sizes, sometimes larger photos."""

    family = "resnet50"

    def on_start(self) -> None:
        super().on_start()
        self.rng = random.Random()
        self.small = _Corpus.get("small_images", _seed(self.environment))
        self.large = _Corpus.get("large_images", _seed(self.environment))

    def _classify(self, task_name: str, images: list[corpora.ImageSample]) -> None:
        image = self.rng.choice(images)
        self.call(task_name, lambda client: client.classify(image.data), len(image.data))

    @task(3)
    def small(self) -> None:
        self._classify("small", self.small)

    @task(1)
    def large(self) -> None:
        self._classify("large", self.large)


class BertUser(TritonUser):
    """Sentence embeddings: prose of varied length, and text full of numbers."""

    family = "bert"

    def on_start(self) -> None:
        super().on_start()
        self.rng = random.Random()
        self.sentences = _Corpus.get("sentences", _seed(self.environment))
        self.numbers = _Corpus.get("numbers", _seed(self.environment))

    def _embed(self, task_name: str, texts: list[str]) -> None:
        text = self.rng.choice(texts)
        self.call(task_name, lambda client: client.embed(text), len(text))

    @task(3)
    def sentence(self) -> None:
        self._embed("sentence", self.sentences)

    @task(1)
    def numbers(self) -> None:
        self._embed("numbers", self.numbers)


class NmtUser(TritonUser):
    """Translation: greedy and beam-search decoding of short sentences and number phrases."""

    family = "nmt"

    def on_start(self) -> None:
        super().on_start()
        self.rng = random.Random()
        self.texts = _Corpus.get("short_sentences", _seed(self.environment)) + _Corpus.get(
            "numbers", _seed(self.environment)
        )
        options = self.environment.parsed_options
        self.beam_size = getattr(options, "beam_size", 4)
        self.max_length = getattr(options, "max_length", 64)

    def _translate(self, task_name: str, beam_size: int) -> None:
        text = self.rng.choice(self.texts)
        self.call(
            task_name,
            lambda client: client.translate(text, beam_size=beam_size, max_length=self.max_length),
            len(text),
        )

    @task(1)
    def greedy(self) -> None:
        self._translate("greedy", 1)

    @task(1)
    def beam(self) -> None:
        self._translate("beam", self.beam_size)


USER_CLASSES: dict[str, type[TritonUser]] = {
    "resnet50": ResNet50User,
    "bert": BertUser,
    "nmt": NmtUser,
}


def close_all_clients(**_kwargs: Any) -> None:
    """Close what on_stop missed (a user killed mid-start); channels left open hang the exit."""
    for client in list(_open_clients):
        client.close()
    sidecar_client.close_all()


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    from triton_kit.loadtest.options import add_arguments

    add_arguments(parser)


def _apply_option_weights(environment: Any, **_kwargs: Any) -> None:
    """At init, and again at each test start: workers and the web UI's custom parameters
    receive the options only then."""
    options = environment.parsed_options
    if options is not None:
        apply_weights(Weights.parse(getattr(options, "weights", "") or ""), USER_CLASSES)


def warn_idle_families(environment: Any) -> list[str]:
    """Name the user classes that got no users (the web UI starts with 1 user for 3 families)."""
    counts = getattr(environment.runner, "user_classes_count", None) or {}
    idle = sorted(name for name, count in counts.items() if count == 0)
    if idle:
        logger.warning(
            "%d users for %d user classes: %s got no users and are not load-tested; start at "
            "least %d users, or pick classes with --class-picker (web UI) or by name",
            sum(counts.values()),
            len(counts),
            ", ".join(idle),
            len(counts),
        )
    return idle


@events.init.add_listener
def _on_init(environment: Any, **_kwargs: Any) -> None:
    from locust.runners import WorkerRunner

    options = environment.parsed_options
    if not isinstance(environment.runner, WorkerRunner):  # the master sees every worker's users
        environment.events.spawning_complete.add_listener(
            lambda **_: warn_idle_families(environment)
        )
        port = getattr(options, "prometheus_port", 0) if options is not None else 0
        if port:
            from triton_kit.loadtest import exporter

            exporter.start(environment, options.prometheus_host, port)
    if options is None:
        return
    _apply_option_weights(environment)
    raw_out = getattr(options, "raw_out", "")
    if raw_out:
        from triton_kit.loadtest import recorder

        recorder.install(environment, raw_out)


events.test_start.add_listener(_apply_option_weights)
events.test_start.add_listener(lambda **_: _availability.clear())  # re-check at each start
events.test_stop.add_listener(close_all_clients)
events.quitting.add_listener(close_all_clients)
