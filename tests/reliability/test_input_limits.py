"""Oversized and hostile inputs get INVALID_ARG naming the configured limit (items 7, 9, 11)."""

from __future__ import annotations

import struct
import zlib

import pytest

from client import InvalidInputError, TritonClient
from python_models.image import ImageLimits
from tests.conftest import require_models

pytestmark = pytest.mark.reliability


def _png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` (a decompression-bomb probe)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.parametrize("side", [10_000, 20_000])
def test_decompression_bomb_is_invalid_arg_naming_our_limit(
    triton_client: TritonClient, side: int
) -> None:
    require_models("resnet50")
    limit = ImageLimits().max_pixels
    with pytest.raises(InvalidInputError, match=f"the limit is {limit} pixels"):
        triton_client.classify(_png_header_only(side, side))
    assert triton_client.server_ready()
