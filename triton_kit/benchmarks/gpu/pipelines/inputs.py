"""Real request data, the same for the served and the in-process pipeline: JPEG bytes for
``resnet50``, the same images decoded (RGB UINT8) for ``resnet50_uint8``, mixed-length
texts for ``bert``, English number phrases for ``nmt``; and perf_analyzer's ``--input-data``
file sending them in turn, one item a request.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.harness import perf_analyzer

IMAGE_SIZE = (640, 480)  # a typical photo: ~50 kB as JPEG, 0.9 MB decoded
IMAGES, SMOKE_IMAGES = 32, 4
TEXTS, SMOKE_TEXTS = 512, 64
LONGEST_WORDS, SMOKE_LONGEST_WORDS = 200, 20
PHRASES = 128


@dataclass(frozen=True)
class Requests:
    """One model's request pool: the items, and perf_analyzer's file sending them."""

    model: str
    items: tuple
    input_file: str


def jpegs(count: int, seed: int = 7) -> list[bytes]:
    """Photo-like synthetic images (gradients, shapes, noise) as 640x480 JPEG files."""
    from triton_kit.build_engines.families.sample_images import synthetic_images

    found = []
    for image in synthetic_images(count, seed):
        buffer = io.BytesIO()
        image.resize(IMAGE_SIZE).save(buffer, format="JPEG", quality=90)
        found.append(buffer.getvalue())
    return found


def decoded(datas: Sequence[bytes]) -> list[np.ndarray]:
    """What a client that decodes its own images sends: RGB UINT8 [height, width, 3]."""
    from PIL import Image

    return [np.asarray(Image.open(io.BytesIO(d)).convert("RGB")) for d in datas]


def texts(smoke: bool) -> list[str]:
    """Sentences of 3 to 200 words (20 in the smoke run), mostly short, fixed by a seed."""
    from triton_kit.benchmarks.gpu.rows import mixed_texts

    if smoke:
        return mixed_texts(SMOKE_TEXTS, longest=SMOKE_LONGEST_WORDS)
    return mixed_texts(TEXTS, longest=LONGEST_WORDS)


def phrases(count: int = PHRASES) -> list[str]:
    """The number model's held-out English sources ("three hundred and twelve", ...)."""
    from triton_kit.benchmarks.nmt.measure import held_out_pairs

    return [source for source, _ in held_out_pairs(with_references=False)][:count]


def requests(model: str, smoke: bool, folder: Path) -> Requests:
    """``model``'s pool, with its input file written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model}-inputs.json"
    if model in ("resnet50", "resnet50_uint8"):
        images = jpegs(SMOKE_IMAGES if smoke else IMAGES)
        if model == "resnet50":
            return Requests(model, tuple(images), perf_analyzer.bytes_inputs(path, "IMAGE", images))
        arrays = decoded(images)
        return Requests(
            model, tuple(arrays), perf_analyzer.array_inputs(path, "IMAGE_UINT8", arrays)
        )
    pool = texts(smoke) if model == "bert" else phrases()
    return Requests(model, tuple(pool), perf_analyzer.text_inputs(path, "TEXT", pool))
