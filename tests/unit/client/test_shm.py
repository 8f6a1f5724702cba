"""triton_kit.client.shm's region pool over real POSIX shared memory, without a server (fast:
mutation runs).

Regions are created in /dev/shm through tritonclient's own module and read back with it;
expected sizes are Triton's wire format written out by hand (BYTES: a 4-byte little-endian
length before each element). Every region made here is destroyed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import tritonclient.utils.shared_memory as system_shm

from triton_kit.client.errors import ConfigurationError
from triton_kit.client.shm import (
    RegionPool,
    check_available,
    cuda_device_count,
    input_bytes,
    still_in_use,
    still_registered,
    unregister_pauses,
)

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


def test_still_in_use_reads_tritons_refusal() -> None:
    assert still_in_use(RuntimeError("currently in use"))
    assert still_in_use(RuntimeError("Cannot unregister 'r', it is currently in use."))
    assert not still_in_use(RuntimeError("Currently In Use"))
    assert not still_in_use(RuntimeError("failed to connect to all addresses"))


def test_unregister_pauses_double_from_5_ms_within_2_s() -> None:
    assert list(unregister_pauses()) == pytest.approx(
        [0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64], abs=1e-12
    )


def test_a_pause_that_ends_exactly_at_the_budget_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("triton_kit.client.shm._FIRST_PAUSE_S", 0.125)  # binary-exact sums
    monkeypatch.setattr("triton_kit.client.shm.UNREGISTER_WAIT_S", 0.375)
    assert list(unregister_pauses()) == [0.0, 0.125, 0.25]  # 0.125 + 0.25 == 0.375


def test_still_registered_warns_naming_the_region_and_the_refusal() -> None:
    with pytest.warns(ResourceWarning) as caught:
        still_registered("tkclient_1_2", RuntimeError("it is currently in use"))
    (warning,) = caught
    assert str(warning.message) == (
        "shared-memory region 'tkclient_1_2' is still registered on the server: "
        "it is currently in use"
    )


class FakeCuda:
    """MOCKED ON PURPOSE: no GPU or cuda-python here. Stands in for tritonclient's CUDA
    shared-memory module (its function names and argument order) and the CUDA runtime."""

    def __init__(self, error: int = 0, count: int = 2) -> None:
        self.cudart = SimpleNamespace(cudaGetDeviceCount=lambda: (error, count))
        self.created: list[tuple[str, int, int]] = []

    def create_shared_memory_region(self, name: str, size: int, device: int) -> str:
        self.created.append((name, size, device))
        return f"handle-{name}"

    def get_raw_handle(self, handle: str) -> bytes:
        return f"raw-{handle}".encode()


def cuda_only(module: FakeCuda) -> Any:
    def load(kind: str) -> FakeCuda:
        if kind != "cuda":
            raise ImportError(f"no {kind!r} shared-memory module here")
        return module

    return load


def test_cuda_device_0_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("triton_kit.client.shm._module", cuda_only(FakeCuda(0, 1)))
    assert check_available("cuda") is None


def test_cuda_device_count_is_zero_on_a_runtime_error() -> None:
    assert cuda_device_count(FakeCuda(0, 3)) == 3
    assert cuda_device_count(FakeCuda(100, 3)) == 0  # cudaErrorNoDevice


def test_cuda_device_must_be_one_this_process_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("triton_kit.client.shm._module", cuda_only(FakeCuda(0, 2)))
    assert check_available("cuda", 1) is None
    with pytest.raises(ConfigurationError) as caught:
        check_available("cuda", 2)
    assert str(caught.value) == (
        "shared_memory='cuda' with cuda_device=2, but this process sees 2 CUDA GPU(s)" + HINT
    )
    monkeypatch.setattr("triton_kit.client.shm._module", cuda_only(FakeCuda(35, 2)))
    with pytest.raises(ConfigurationError, match="sees 0 CUDA GPU"):
        check_available("cuda", 0)


def test_cuda_regions_are_made_on_the_pools_device(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda()
    monkeypatch.setattr("triton_kit.client.shm._module", lambda kind: cuda)
    pool = RegionPool("cuda", device=1)
    region, new = pool.take(64)
    assert new and region.key == "" and region.size == 64
    assert region.name.startswith(f"tkclient_{os.getpid()}_")
    assert cuda.created == [(region.name, 64, 1)] and region.handle == f"handle-{region.name}"
    assert pool.raw_handle(region) == f"raw-handle-{region.name}".encode()


def test_cuda_regions_default_to_device_0(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda()
    monkeypatch.setattr("triton_kit.client.shm._module", lambda kind: cuda)
    region, _ = RegionPool("cuda").take(8)
    assert cuda.created == [(region.name, 8, 0)]
