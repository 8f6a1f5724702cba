"""client.shm's region pool over real POSIX shared memory, without a server (fast: mutation runs).

Regions are created in /dev/shm through tritonclient's own module and read back with it;
expected sizes are Triton's wire format written out by hand (BYTES: a 4-byte little-endian
length before each element). Every region made here is destroyed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.utils.shared_memory as system_shm

from client.errors import ConfigurationError
from client.shm import RegionPool, check_available, input_bytes

HINT = "; on a host without one use shared_memory='system' (same host) or None"


@pytest.fixture
def pool() -> Iterator[RegionPool]:
    regions = RegionPool("system")
    yield regions
    for region in regions.drain():
        regions.destroy(region)


def test_input_bytes_in_the_wire_format() -> None:
    assert input_bytes(np.zeros((2, 3), dtype=np.float32)) == 24
    assert input_bytes(np.zeros(5, dtype=np.int64)) == 40
    assert input_bytes(np.array([b"ab", b"cde"], dtype=np.object_)) == (4 + 2) + (4 + 3)
    assert input_bytes(np.array([], dtype=np.object_)) == 0


def test_take_creates_then_reuses_the_smallest_region_that_fits(pool: RegionPool) -> None:
    small, new = pool.take(100)
    assert new and small.size == 100
    assert small.name.startswith(f"tkclient_{os.getpid()}_") and small.key == f"/{small.name}"
    large, new = pool.take(300)
    assert new and large.size == 300 and large.name != small.name
    pool.give(large)
    pool.give(small)
    again, new = pool.take(50)
    assert again is small and not new  # the smaller of the two that fit
    exact, new = pool.take(300)
    assert exact is large and not new  # a region exactly as large as asked fits
    third, new = pool.take(10)
    assert new and third.size == 10  # none free: a new one
    assert {r.name for r in pool.drain()} == {small.name, large.name, third.name}
    for region in (small, large, third):
        pool.destroy(region)
    assert pool.drain() == []


def test_write_puts_the_tensor_in_the_region(pool: RegionPool) -> None:
    region, _ = pool.take(24)
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    pool.write(region, values)
    back = system_shm.get_contents_as_numpy(region.handle, np.float32, [2, 3])
    assert back.tolist() == values.tolist()


def test_bytes_are_written_length_prefixed(pool: RegionPool) -> None:
    region, _ = pool.take(13)
    pool.write(region, np.array([b"ab", b"cde"], dtype=np.object_))
    raw = system_shm.get_contents_as_numpy(region.handle, np.uint8, [13]).tobytes()
    assert raw == b"\x02\x00\x00\x00ab\x03\x00\x00\x00cde"


def test_destroy_removes_the_region_from_dev_shm(pool: RegionPool) -> None:
    region, _ = pool.take(8)
    path = f"/dev/shm{region.key}"
    assert os.path.exists(path)
    pool.destroy(region)
    assert not os.path.exists(path)
    pool.drain()


@pytest.mark.parametrize("kind", [None, "system"])
def test_only_cuda_is_checked(kind: str | None) -> None:
    assert check_available(kind) is None  # type: ignore[arg-type]


def test_cuda_without_cuda_python_or_a_gpu_says_what_to_do() -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_available("cuda")
    message = str(caught.value)
    assert message.startswith("shared_memory='cuda'")
    assert HINT in message
    assert f"GPU{HINT}" in message or f"GPU(s){HINT}" in message  # the hint follows the need
    assert "pip install 'tritonclient[cuda]'" in message or "CUDA GPU(s)" in message
