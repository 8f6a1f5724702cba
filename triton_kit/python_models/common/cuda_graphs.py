"""CUDA graphs per input shape, for the CUDA-graph python model (``torchscript``).

Why: a transformer or a ResNet at small batches is launch-bound on the GPU (eager
ResNet-50 took ~8 ms for 5-9 images on the H100); one graph replay launches the whole
forward at once. A graph is captured for fixed shapes, so each (batch, inner shapes)
gets its own, a batch is padded up to the smallest graph that holds it, and the rows
wanted are sliced back out. The shapes come from Triton's own ``optimization { cuda {
graphs: true graph_spec {...} } }`` (:func:`graph_shapes`) or from the caller's buckets.

:class:`CudaGraph` on a CPU device keeps the same static buffers, padding and slicing
but runs the forward eagerly instead of capturing: that is how the GPU path's
bookkeeping is tested on machines without a GPU. Python 3.10.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

Shapes = dict[str, tuple[int, ...]]


class Sized(Protocol):
    batch: int
    inner_shapes: Shapes


G = TypeVar("G", bound=Sized)


def cuda_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``optimization.cuda`` block of a model config in Triton's JSON form."""
    return dict(config.get("optimization", {}).get("cuda", {}))


def graphs_enabled(config: Mapping[str, Any]) -> bool:
    value = cuda_options(config).get("graphs", False)
    return value is True or str(value).lower() == "true"


def graph_shapes(config: Mapping[str, Any]) -> list[Shapes]:
    """Full input shapes (batch first) of each ``graph_spec``; config dims fill the rest."""
    dims = {spec["name"]: [int(d) for d in spec["dims"]] for spec in config["input"]}
    result = []
    for spec in cuda_options(config).get("graph_spec", []):
        batch = int(spec.get("batch_size", 0)) or 1
        shapes = {}
        for name, own in dims.items():
            given = spec.get("input", {}).get(name, {}).get("dim")
            inner = [int(d) for d in given] if given else own
            if any(d < 0 for d in inner):
                raise ValueError(f"graph_spec for batch {batch} leaves '{name}' dims {inner} open")
            shapes[name] = (batch, *inner)
        result.append(shapes)
    return result


def graph_key(shapes: Mapping[str, tuple[int, ...]]) -> tuple:
    return tuple(sorted(shapes.items()))


def batch_buckets(largest: int) -> tuple[int, ...]:
    """Powers of two below ``largest``, then ``largest``: 32 -> (1, 2, 4, 8, 16, 32)."""
    if largest < 1:
        raise ValueError(f"the largest batch must be at least 1, got {largest}")
    buckets = []
    size = 1
    while size < largest:
        buckets.append(size)
        size *= 2
    return (*buckets, largest)


def pick(graphs: Iterable[G], inner_shapes: Mapping[str, tuple[int, ...]], rows: int) -> G | None:
    """The smallest graph with these non-batch shapes and at least ``rows`` rows, or None."""
    wanted = {name: tuple(shape) for name, shape in inner_shapes.items()}
    fitting = [g for g in graphs if g.inner_shapes == wanted and g.batch >= rows]
    return min(fitting, key=lambda g: g.batch) if fitting else None


def row_chunks(rows: int, largest: int) -> list[tuple[int, int]]:
    """``[start, stop)`` slices of at most ``largest`` rows covering ``rows`` rows."""
    if largest < 1:
        raise ValueError(f"chunks need at least 1 row, got {largest}")
    return [(start, min(start + largest, rows)) for start in range(0, rows, largest)]


class CudaGraph:
    """One captured forward: static (pinned host and device) inputs, static outputs.

    ``run`` copies ``rows`` rows into the static inputs (rows past them keep what the
    previous call left: every row is computed independently, so they only cost time),
    replays, and returns the first ``rows`` rows of each output on the host. Graphs that
    share a ``pool`` must never replay concurrently and their outputs must be read
    before another one replays (``run`` does both when one thread owns the graphs).
    """

    def __init__(
        self,
        forward: Callable[[dict[str, Any]], Sequence[Any]],
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, Any],
        device: str = "cuda",
        pool: Any = None,
    ) -> None:
        import torch

        self.torch = torch
        self.forward = forward
        self.batch = next(iter(shapes.values()))[0]
        self.inner_shapes = {name: tuple(shape[1:]) for name, shape in shapes.items()}
        self.cuda = torch.device(device).type == "cuda"
        host = {n: torch.zeros(s, dtype=dtypes[n]) for n, s in shapes.items()}
        self.host = {n: t.pin_memory() for n, t in host.items()} if self.cuda else host
        self.static = {n: t.to(device) for n, t in self.host.items()} if self.cuda else host
        self.outputs: list[Any] = []
        self.replays = 0
        if self.cuda:
            self._capture(pool)

    def _capture(self, pool: Any) -> None:
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.inference_mode():
            for _ in range(3):  # warm-up outside the graph, as torch.cuda.graphs advises
                self.forward(self.static)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool), torch.inference_mode():
            self.outputs = [o.float() for o in self.forward(self.static)]

    @property
    def pool(self) -> Any:
        """The memory pool to pass to the next graph that may share it (None on CPU)."""
        return self.graph.pool() if self.cuda else None

    def run(self, stacked: Mapping[str, np.ndarray], rows: int) -> list[np.ndarray]:
        torch = self.torch
        self.replays += 1
        for name, array in stacked.items():
            self.host[name][:rows].copy_(torch.from_numpy(np.ascontiguousarray(array)))
            if self.cuda:
                self.static[name].copy_(self.host[name], non_blocking=True)
        if self.cuda:
            self.graph.replay()
        else:
            with torch.inference_mode():
                self.outputs = [o.float() for o in self.forward(self.static)]
        return [out[:rows].cpu().numpy() for out in self.outputs]
