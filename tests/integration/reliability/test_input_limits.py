"""Oversized and hostile inputs get INVALID_ARG naming the configured limit (items 7, 9, 11)."""

from __future__ import annotations

import struct
import zlib

import pytest

from tests.support.prerequisites import require_models
from triton_kit.client import InvalidInputError, TritonClient
from triton_kit.python_models.resnet50.image import ImageLimits

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


def _nmt_http(triton_server, texts: list[bytes], beam: int):
    import numpy as np
    import tritonclient.http as httpclient

    rows = len(texts)
    text = httpclient.InferInput("TEXT", [rows, 1], "BYTES")
    text.set_data_from_numpy(np.array([[t] for t in texts], dtype=np.object_))
    beams = httpclient.InferInput("BEAM_SIZE", [rows, 1], "INT32")
    beams.set_data_from_numpy(np.full((rows, 1), beam, dtype=np.int32))
    url = triton_server.http_url.removeprefix("http://")
    with httpclient.InferenceServerClient(url, network_timeout=120) as client:
        client.infer("nmt", [text, beams])


def test_nmt_text_over_the_byte_limit_is_rejected_before_work(triton_server) -> None:
    from tritonclient.utils import InferenceServerException

    from triton_kit.python_models.bert.text import DEFAULT_MAX_TEXT_BYTES

    require_models("nmt")
    text = b"one two three. " * (DEFAULT_MAX_TEXT_BYTES // 15 + 1)
    with pytest.raises(InferenceServerException, match=f"limit is {DEFAULT_MAX_TEXT_BYTES} bytes"):
        _nmt_http(triton_server, [text], 1)
    assert triton_server.is_ready()


def test_nmt_rows_times_beam_is_bounded(triton_server) -> None:
    """32 rows x beam 16 took 10 s and +500 MB in the stub; now INVALID_ARG at once."""
    from tritonclient.utils import InferenceServerException

    require_models("nmt")
    with pytest.raises(InferenceServerException, match="BEAM_SIZE x MAX_LENGTH") as raised:
        _nmt_http(triton_server, [b"I have 3 cats."] * 32, 16)
    assert raised.value.status() in ("400", "StatusCode.INVALID_ARGUMENT"), raised.value.status()
