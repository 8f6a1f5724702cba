"""Blocking client: ``TritonClient("grpc://localhost:8001").classify("cat.jpg")``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from triton_kit.client.base import (
    ClientBase,
    Codec,
    as_list,
    hidden_size,
    probes,
    raise_first,
    stack_embeddings,
)
from triton_kit.client.codecs import Call, ImageInput
from triton_kit.client.errors import TritonClientError, not_ready
from triton_kit.client.transport import Transport
from triton_kit.client.types import Classification, Timeout

R = TypeVar("R")
T = TypeVar("T")


class TritonClient(ClientBase):
    """Typed access to the kit's models over gRPC or HTTP (picked from the URL scheme).

    Batch methods send one request per item, concurrently, so Triton's dynamic
    batcher can group them and one bad item fails only itself. Every error raised
    derives from ``TritonClientError`` (see ``triton_kit.client.errors``).

    Args:
        url: ``grpc://host:8001``, ``grpcs://``, ``http://host:8000`` or ``https://``.
        timeout: seconds per call (or a ``Timeout``); sent to the server as the deadline.
        max_concurrency: requests in flight at once for a batch call.
        models: another Triton model per SDK method, e.g. ``{"embed": "my_bert"}``; the key
            ``"classify_uint8"`` names the model ``classify`` sends decoded images to.
        versions: a model version per Triton model name, e.g. ``{"bert": 2}``.
        headers: sent with every request (auth, and Triton's restricted-API key).
        retry: a ``Retry`` policy, or a number of retries (0: off) for connection failures
            and overload, with jittered exponential backoff within the call's deadline.
        tls: certificate files for ``grpcs://`` / ``https://``.
        compression: ``"gzip"`` or ``"deflate"`` on the wire.
        shared_memory: ``"system"`` (same host) or ``"cuda"`` (same GPU) for inputs of at
            least ``shared_memory_threshold`` bytes; regions are released by ``close()``.
        api_key: the server's restricted-API key (``TRITON_KIT_API_KEY``), sent under the
            header name each protocol expects; needed for shared-memory registration.
        client_factory: builds the tritonclient client (tests pass a fake).

    Raises:
        ConfigurationError: a bad URL or option.
    """

    def _start(self) -> None:
        self._local = threading.local()
        self._transports: list[Transport] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # -- plumbing ------------------------------------------------------------
    def _transport(self) -> Transport:
        self._check_open()
        transport = getattr(self._local, "transport", None)
        if transport is None:
            transport = Transport(self.endpoint, self.options, self.client_factory)
            self._local.transport = transport
            with self._lock:
                self._transports.append(transport)
        return transport

    def _infer(self, call: Call, timeout: float | Timeout | None) -> dict[str, np.ndarray]:
        return self._transport().infer(self._request(call, timeout))

    def _one(self, codec: Codec[R], item: Any, timeout: float | Timeout | None) -> R:
        return codec.decode(self._infer(codec.encode(item), timeout))

    def _each(
        self, codec: Codec[R], items: Sequence[Any], timeout: float | Timeout | None
    ) -> list[R | TritonClientError]:
        return self._map(lambda item: self._one(codec, item, timeout), items)

    def _map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T | TritonClientError]:
        def guarded(item: Any) -> T | TritonClientError:
            try:
                return fn(item)
            except TritonClientError as exc:
                return exc

        self._check_open()
        if len(items) <= 1:
            return [guarded(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="triton")
        return list(self._pool.map(guarded, items))

    # -- models ------------------------------------------------------------
    def classify(
        self, image: ImageInput, top_k: int = 5, *, timeout: float | Timeout | None = None
    ) -> Classification:
        """Top-k ImageNet classes for one image, encoded or already decoded.

        Encoded bytes (JPEG, PNG, WebP) or a file path go to ``models["classify"]``
        (``resnet50``), which decodes them. A decoded image, a numpy ``uint8`` RGB array of
        shape ``[height, width, 3]`` or a PIL image (any mode, converted to RGB here), goes
        as pixels to ``models["classify_uint8"]`` (``resnet50_uint8``): same recipe, same
        results, no encoding or decoding on either side.

        Raises InvalidInputError (an array that is not uint8, not 3-dimensional or not
        3-channel, checked before sending; a PIL image that cannot be converted; a missing
        file; top_k out of 1..5; a bad image or one under 8 pixels a side, from the server),
        ModelUnavailableError / ServerOverloadedError, DeadlineExceededError,
        ServerConnectionError, ServerError, ClientClosedError.
        """
        return self._one(self._classifier(top_k), image, timeout)

    def classify_batch(
        self,
        images: Sequence[ImageInput],
        top_k: int = 5,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> list[Classification | TritonClientError]:
        """``classify`` per image, concurrently; encoded and decoded images may be mixed.

        ``return_exceptions`` returns failures in place.

        Raises the first item's error as ``classify`` does, prefixed with "item N:".
        """
        results = self._each(self._classifier(top_k), images, timeout)
        return results if return_exceptions else raise_first(results)

    def embed(
        self,
        texts: str | bytes | Sequence[str | bytes],
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
    ) -> Any:
        """L2-normalised sentence embeddings, shape (n, hidden); (0, hidden) for no texts.

        With ``return_exceptions=True``, a list with one vector or one error per text.
        Raises InvalidInputError (bad UTF-8, too long), and the errors ``classify`` raises.
        """
        items, single = as_list(texts)
        results = self._each(self._embedder(), items, timeout)
        if return_exceptions:
            return results
        rows = raise_first(results, single)
        return stack_embeddings(rows, None if rows else self._embedding_width(timeout))

    def _embedding_width(self, timeout: float | Timeout | None) -> int:
        if self._hidden_size is None:
            request = Timeout.of(timeout, self.timeout).request
            self._hidden_size = hidden_size(
                self.model_metadata(self.models["embed"], timeout=request)
            )
        return self._hidden_size

    def translate(
        self,
        texts: str | bytes | Sequence[str | bytes],
        beam_size: int = 4,
        max_length: int | None = None,
        *,
        timeout: float | Timeout | None = None,
        return_exceptions: bool = False,
        model: str | None = None,
    ) -> list[Any]:
        """Translations in input order; ``beam_size=1`` is greedy decoding.

        ``max_length`` counts tokens as Hugging Face does, the decoder start token
        included: 2 leaves room for one token, often end-of-sentence, hence ''.
        ``model`` picks another translation model with nmt's inputs (e.g. ``"nmt_rnn"``).
        Raises InvalidInputError (beam_size/max_length out of range, checked before
        sending; bad text), and the errors ``classify`` raises.
        """
        items, single = as_list(texts)
        results = self._each(self._translator(beam_size, max_length, model), items, timeout)
        return results if return_exceptions else raise_first(results, single)

    def infer(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        outputs: Sequence[str] = (),
        *,
        model_version: str | int | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | Timeout | None = None,
        idempotent: bool = True,
    ) -> dict[str, np.ndarray]:
        """Any model in the repository: named numpy inputs in, named numpy outputs out.

        ``outputs`` empty returns every output. BYTES tensors are ``np.object_`` arrays.
        ``idempotent=False`` turns retries off for this call (stateful/sequence models).
        Raises the errors ``classify`` raises.
        """
        call = Call(model, dict(inputs), tuple(outputs))
        request = self._request(call, timeout, request_id, headers, model_version, idempotent)
        return self._transport().infer(request)

    # -- server ------------------------------------------------------------
    def server_ready(self, *, timeout: float | None = None) -> bool:
        """True when the server is live and ready; False while it refuses connections.

        Raises DeadlineExceededError, ServerConnectionError (DNS, TLS), ServerError.
        """
        return self._transport().server_ready(self._probe_timeout(timeout))

    def model_ready(
        self, model: str, *, version: str | int | None = None, timeout: float | None = None
    ) -> bool:
        """True when ``model`` (at ``version``) is loaded and ready; raises as ``server_ready``."""
        return self._transport().model_ready(
            model, self._version(model, version), self._probe_timeout(timeout)
        )

    def model_metadata(
        self, model: str, *, version: str | int | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """The model's inputs and outputs. Raises ModelUnavailableError and the others."""
        return self._transport().model_metadata(
            model, self._version(model, version), self._probe_timeout(timeout)
        )

    def wait_until_ready(self, timeout: float = 60.0, models: Sequence[str] = ()) -> None:
        """Block until the server (and the given models) report ready.

        Raises DeadlineExceededError naming the URL and the limit; DNS/TLS errors at once.
        """
        for probe, pause in probes(timeout):
            if self.server_ready(timeout=probe) and all(
                self.model_ready(m, timeout=probe) for m in models
            ):
                return
            time.sleep(pause)
        raise not_ready(self.url, timeout)

    def close(self) -> None:
        """Release connections and shared memory; later calls raise ClientClosedError."""
        self.closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            for transport in self._transports:
                transport.close()
            self._transports.clear()
        self._local = threading.local()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
