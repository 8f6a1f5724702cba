"""Deterministic synthetic images of varied sizes and content (no dataset download needed)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from PIL import Image, ImageDraw


def synthetic_images(count: int, seed: int = 0) -> Iterator[Image.Image]:
    """RGB images with gradients, shapes and noise, sizes from 64 to 640 pixels a side."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        width, height = (int(v) for v in rng.integers(64, 641, size=2))
        yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
        base = np.stack(
            [
                (xx / width) * rng.uniform(80, 255),
                (yy / height) * rng.uniform(80, 255),
                np.full_like(xx, rng.uniform(0, 255)),
            ],
            axis=-1,
        )
        base += rng.normal(0, rng.uniform(2, 30), size=base.shape)
        image = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), "RGB")
        draw = ImageDraw.Draw(image)
        for _ in range(int(rng.integers(1, 6))):
            x0, y0 = int(rng.integers(0, width)), int(rng.integers(0, height))
            x1, y1 = x0 + int(rng.integers(8, width)), y0 + int(rng.integers(8, height))
            colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
            if rng.random() < 0.5:
                draw.ellipse([x0, y0, x1, y1], fill=colour)
            else:
                draw.rectangle([x0, y0, x1, y1], fill=colour)
        yield image
