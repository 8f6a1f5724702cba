"""Client CPU a ``translate`` costs: the kit's SDK against bare ``tritonclient.grpc``.

    python -m triton_kit.benchmarks.nmt.sdk_profile                  # no server
    python -m triton_kit.benchmarks.nmt.sdk_profile --model-repository REPO [--profile]

The benchmark's ``Triton ct2 text (gRPC)`` clients call ``TritonClient.translate`` (one sentence
a request, from closed-loop threads); its ``ct2 text raw gRPC`` clients build the same request
with bare ``tritonclient.grpc`` (``served.raw_text_factory``). Both share the machine's cores
with the server, so client CPU a request is taken from the engine. Measured here, one client at
a time, sequential:

- without a server (the default): tritonclient's real request building and result parsing, its
  gRPC stub swapped for one that serialises the request and returns a canned response, so
  only Python runs: microseconds of this process's CPU a call;
- with ``--model-repository`` (a built default ``nmt``, the ctranslate2 backend's text mode;
  ``make backends`` builds the backend): the server started on it, the variants interleaved for
  ``--rounds`` rounds, the calling thread's CPU a request (``RUSAGE_THREAD``: the Python and the
  gRPC call made inline, not gRPC's own threads), median and lowest round.

``--profile`` adds cProfile's top functions of each variant.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import statistics
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from triton_kit.benchmarks.nmt.served import raw_text_call

SENTENCES = [
    f"{hundreds} hundred and {rest}"
    for hundreds in ("one", "two", "three", "five", "nine")
    for rest in ("four", "twelve", "sixty one", "ninety")
]
TRANSLATION = "trois cent quarante"  # the canned response's text
Call = Callable[[str], str]


def sdk_call(client: Any, beam: int) -> Call:
    """``served.triton_factory``'s request."""
    return lambda sentence: str(client.translate(sentence, beam_size=beam)[0])


class CannedStub:
    """tritonclient's gRPC stub without a server: serialises the request, answers ``text``."""

    def __init__(self, text: str = TRANSLATION) -> None:
        from tritonclient.grpc import service_pb2

        self.response = service_pb2.ModelInferResponse(model_name="nmt", model_version="1")
        output = self.response.outputs.add(name="TRANSLATION", datatype="BYTES")
        output.shape.extend([1, 1])
        encoded = text.encode()
        self.response.raw_output_contents.append(struct.pack("<I", len(encoded)) + encoded)

    def ModelInfer(self, request: Any, **kwargs: Any) -> Any:  # gRPC's method name
        request.SerializeToString()
        return self.response


def canned_client(_spec: object = None) -> Any:
    """A real ``tritonclient.grpc.InferenceServerClient`` whose stub is ``CannedStub``."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient("localhost:1")
    client._client_stub = CannedStub()
    return client


@contextmanager
def served_variants(repository: Path | None, beam: int) -> Iterator[dict[str, Call]]:
    """``{"sdk": ..., "bare": ...}`` against ``repository`` served, or canned without one."""
    from triton_kit.client import TritonClient

    if repository is None:
        sdk = TritonClient("grpc://localhost:1", client_factory=canned_client)
        yield {"sdk": sdk_call(sdk, beam), "bare": raw_text_call(canned_client(), beam)}
        sdk.close()
        return
    import tritonclient.grpc as grpcclient

    from triton_kit.server import ServerConfig, TritonServer

    config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
    with TritonServer(config) as server:
        sdk = TritonClient(server.grpc_url)
        bare = grpcclient.InferenceServerClient(server.grpc_url.split("://", 1)[-1])
        yield {"sdk": sdk_call(sdk, beam), "bare": raw_text_call(bare, beam)}
        sdk.close()
        bare.close()


def thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def cpu_per_call(variants: dict[str, Call], calls: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds of the calling thread's CPU a call, per variant and round (interleaved)."""
    for call in variants.values():  # warm up, and both answer alike
        for sentence in SENTENCES:
            call(sentence)
    spent: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, call in variants.items():
            start = thread_cpu()
            for n in range(calls):
                call(SENTENCES[n % len(SENTENCES)])
            spent[name].append((thread_cpu() - start) / calls * 1e6)
    return spent


def profile(call: Call, calls: int, top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for n in range(calls):
        call(SENTENCES[n % len(SENTENCES)])
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-repository", type=Path, default=None)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--calls", type=int, default=None, help="a round's calls a variant")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    calls = args.calls or (20000 if args.model_repository is None else 300)
    where = "canned (no server)" if args.model_repository is None else str(args.model_repository)
    with served_variants(args.model_repository, args.beam) as variants:
        started = time.perf_counter()
        spent = cpu_per_call(variants, calls, args.rounds)
        seconds = time.perf_counter() - started
        print(
            f"{where}, beam {args.beam}: {calls} calls x {args.rounds} rounds a variant, "
            f"{seconds:.0f} s; calling thread's CPU a call (us)"
        )
        for name, rounds in spent.items():
            print(f"  {name:5s} median {statistics.median(rounds):7.1f}  lowest {min(rounds):7.1f}")
        if args.profile:
            for name, call in variants.items():
                print(f"==== {name} ====\n{profile(call, calls)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
