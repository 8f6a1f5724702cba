"""Shared-memory regions for large inputs: system (``/dev/shm``) or CUDA, reused across calls.

A region is created and registered with Triton the first time an input needs one, then
reused by later inputs that fit; ``close()`` on the client unregisters and destroys
them all. Only works when the client and the server share a host (or a GPU).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from triton_kit.client.errors import ConfigurationError
from triton_kit.client.options import SharedMemoryKind

_counter = itertools.count()
# Triton holds an input region until it releases the request, which can come just after the
# response: an unregister sent at once is refused "currently in use" (gRPC, ~6 % of closes
# right after a call). close() tries again, doubling the pause from 5 ms, for this long.
UNREGISTER_WAIT_S = 2.0
_FIRST_PAUSE_S = 0.005
# Not "triton_kit_": the embedded server names its python-backend regions so.
REGION_PREFIX = "tkclient_"


@dataclass
class Region:
    name: str  # the name Triton knows it by
    key: str  # the POSIX shm key (system) or '' (cuda)
    size: int
    handle: Any


def input_bytes(array: np.ndarray) -> int:
    """Size of a tensor in Triton's wire format (BYTES are length-prefixed)."""
    if array.dtype == np.object_:
        from tritonclient.utils import serialize_byte_tensor

        serialized = serialize_byte_tensor(array)
        return len(serialized.item()) if serialized.size else 0
    return int(array.nbytes)


def still_in_use(exc: BaseException) -> bool:
    """Triton refused to unregister a region because a request still holds it."""
    return "currently in use" in str(exc)


def unregister_pauses() -> Iterator[float]:
    """Seconds to wait before each unregister attempt: 0, then doubling; UNREGISTER_WAIT_S total."""
    yield 0.0
    pause, waited = _FIRST_PAUSE_S, 0.0
    while waited + pause <= UNREGISTER_WAIT_S:
        yield pause
        waited += pause
        pause *= 2


def unregister_waiting(
    unregister: Callable[..., Any], name: str, **kwargs: Any
) -> BaseException | None:
    """``unregister(name, **kwargs)``, again while Triton answers "in use" (pauses from
    :func:`unregister_pauses`): None once it succeeds, else the failure that ended it."""
    failure: BaseException | None = None
    for pause in unregister_pauses():
        time.sleep(pause)
        try:
            unregister(name, **kwargs)
            return None
        except Exception as exc:
            failure = exc
            if not still_in_use(exc):
                break
    return failure


async def unregister_waiting_async(
    unregister: Callable[..., Awaitable[Any]], name: str, **kwargs: Any
) -> BaseException | None:
    """:func:`unregister_waiting` for an asyncio client (the pauses awaited)."""
    failure: BaseException | None = None
    for pause in unregister_pauses():
        await asyncio.sleep(pause)
        try:
            await unregister(name, **kwargs)
            return None
        except Exception as exc:
            failure = exc
            if not still_in_use(exc):
                break
    return failure


def still_registered(name: str, exc: BaseException | None) -> None:
    """Warn that closing left ``name`` registered on the server (its mapping lives on there)."""
    import warnings

    warnings.warn(
        f"shared-memory region {name!r} is still registered on the server: {exc}",
        ResourceWarning,
        stacklevel=3,
    )


class RegionPool:
    """Free regions of one kind; ``take`` hands out one at least as large as asked."""

    def __init__(self, kind: SharedMemoryKind, device: int = 0) -> None:
        self.kind = kind
        self.device = device
        self._free: list[Region] = []
        self._all: list[Region] = []
        self._lock = threading.Lock()
        self._module = _module(kind)

    def take(self, size: int) -> tuple[Region, bool]:
        """A region of at least ``size`` bytes, and whether it is new (to be registered)."""
        with self._lock:
            fitting = [r for r in self._free if r.size >= size]
            if fitting:
                region = min(fitting, key=lambda r: r.size)
                self._free.remove(region)
                return region, False
        region = self._create(size)
        with self._lock:
            self._all.append(region)
        return region, True

    def give(self, region: Region) -> None:
        with self._lock:
            self._free.append(region)

    def write(self, region: Region, array: np.ndarray) -> None:
        """BYTES tensors go in Triton's length-prefixed wire format."""
        if array.dtype == np.object_:
            from tritonclient.utils import serialize_byte_tensor

            array = np.frombuffer(serialize_byte_tensor(array).item(), dtype=np.uint8)
        self._module.set_shared_memory_region(region.handle, [array])

    def raw_handle(self, region: Region) -> Any:
        return self._module.get_raw_handle(region.handle)

    def drain(self) -> list[Region]:
        """Every region created, forgotten by the pool: the caller unregisters, then destroys."""
        with self._lock:
            regions, self._all, self._free = self._all, [], []
        return regions

    def destroy(self, region: Region) -> None:
        self._module.destroy_shared_memory_region(region.handle)

    def _create(self, size: int) -> Region:
        name = f"{REGION_PREFIX}{os.getpid()}_{next(_counter)}"
        if self.kind == "system":
            key = f"/{name}"
            handle = self._module.create_shared_memory_region(name, key, size)
            return Region(name, key, size, handle)
        handle = self._module.create_shared_memory_region(name, size, self.device)
        return Region(name, "", size, handle)


def check_available(kind: SharedMemoryKind | None, device: int = 0) -> None:
    """Refuse at construction, saying what to do, a kind this host cannot provide.

    Why here: tritonclient's CUDA module fails only at the first large input, with a
    RuntimeError that does not say which option caused it. Imports stay lazy: nothing
    CUDA is touched unless ``shared_memory="cuda"`` was asked for.
    """
    if kind != "cuda":
        return
    hint = "; on a host without one use shared_memory='system' (same host) or None"
    try:
        module = _module("cuda")
    except (ImportError, RuntimeError) as exc:
        raise ConfigurationError(
            "shared_memory='cuda' needs the cuda-python package "
            f"(pip install 'tritonclient[cuda]') and a CUDA GPU{hint} ({exc})"
        ) from exc
    count = cuda_device_count(module)
    if device >= count:
        raise ConfigurationError(
            f"shared_memory='cuda' with cuda_device={device}, but this process sees "
            f"{count} CUDA GPU(s){hint}"
        )


def cuda_device_count(module: Any) -> int:
    """GPUs visible through the CUDA runtime tritonclient's module uses (0 on errors)."""
    error, count = module.cudart.cudaGetDeviceCount()
    return int(count) if int(error) == 0 else 0


def _module(kind: SharedMemoryKind) -> Any:
    if kind == "system":
        import tritonclient.utils.shared_memory as system

        return system
    import tritonclient.utils.cuda_shared_memory as cuda  # needs cuda-python and a GPU

    return cuda
