"""Generated test images: varied sizes, colour modes and formats, plus broken ones."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

# (width, height, mode, format): every mode the pre-processor must convert, every format.
IMAGE_CASES = [
    (320, 240, "RGB", "JPEG"),
    (224, 224, "RGB", "PNG"),
    (640, 480, "RGB", "WEBP"),
    (97, 301, "RGB", "JPEG"),
    (500, 375, "RGBA", "PNG"),
    (256, 512, "RGBA", "WEBP"),
    (300, 200, "L", "JPEG"),
    (150, 150, "L", "PNG"),
    (333, 222, "P", "PNG"),
    (1024, 768, "RGB", "JPEG"),
    (64, 48, "RGB", "PNG"),
    (801, 600, "P", "WEBP"),
]


def make_image(width: int, height: int, mode: str, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    rgb = np.stack(
        [(xx * 255 // max(width - 1, 1)), (yy * 255 // max(height - 1, 1)), (xx + yy) % 256],
        axis=-1,
    ).astype(np.int16)
    rgb += rng.integers(-40, 40, size=rgb.shape, dtype=np.int16)
    image = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    if mode == "RGBA":
        alpha = Image.fromarray(rng.integers(0, 256, (height, width), dtype=np.uint8), "L")
        image.putalpha(alpha)
        return image
    if mode == "P":
        return image.quantize(colors=64)
    return image.convert(mode)


def encode(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt in {"JPEG", "WEBP"} else {}))
    return buffer.getvalue()


def case_bytes() -> list[tuple[str, bytes]]:
    return [
        (f"{w}x{h}-{mode}-{fmt}", encode(make_image(w, h, mode, seed), fmt))
        for seed, (w, h, mode, fmt) in enumerate(IMAGE_CASES)
    ]


def jpeg(width: int = 320, height: int = 240, seed: int = 0) -> bytes:
    return encode(make_image(width, height, "RGB", seed), "JPEG")
