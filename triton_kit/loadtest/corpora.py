"""Payloads that look like real traffic, generated at start from a seed.

Real clients send photos of many sizes in JPEG, PNG and WebP, sentences from a few words
to a paragraph, and text full of numbers (prices, dates, quantities). Constant payloads
would let caches and the dynamic batcher flatter the results, so each corpus varies
size and content; a fixed seed keeps runs comparable.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

# (format, Pillow save options): the three the ResNet-50 pre-processor accepts.
IMAGE_FORMATS = (("JPEG", {"quality": 85}), ("PNG", {}), ("WEBP", {"quality": 80}))
SMALL_SIDES = (96, 128, 160, 224, 256)
LARGE_SIDES = (320, 400, 480, 640)


@dataclass(frozen=True)
class ImageSample:
    data: bytes
    fmt: str
    width: int
    height: int


def _picture(rng: random.Random, width: int, height: int) -> Image.Image:
    """A gradient with random shapes and noise: compresses like a photo, not like a flat fill."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 6.28)
    base = np.stack(
        [
            127 + 120 * np.sin(x / rng.uniform(15, 60) + phase),
            127 + 120 * np.cos(y / rng.uniform(15, 60) - phase),
            127 + 120 * np.sin((x + y) / rng.uniform(20, 80)),
        ],
        axis=-1,
    )
    noise = np.random.default_rng(rng.randrange(2**32)).normal(0, 12, base.shape)
    image = Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(3, 9)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        box = (x0, y0, x0 + rng.randint(8, width // 2 + 8), y0 + rng.randint(8, height // 2 + 8))
        colour = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    return image


def encode(image: Image.Image, fmt: str, options: dict) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def images(count: int, sides: tuple[int, ...], seed: int = 0) -> list[ImageSample]:
    """``count`` images, each side drawn from ``sides`` (so aspect ratios vary), formats mixed."""
    rng = random.Random(seed)
    samples = []
    for index in range(count):
        width, height = rng.choice(sides), rng.choice(sides)
        fmt, options = IMAGE_FORMATS[index % len(IMAGE_FORMATS)]
        data = encode(_picture(rng, width, height), fmt, options)
        samples.append(ImageSample(data, fmt, width, height))
    return samples


_SUBJECTS = (
    "the customer", "our team", "a small bakery", "the new library", "my neighbour",
    "the research group", "this application", "the city council", "a travelling musician",
    "the support engineer", "the old bridge", "every student",
)  # fmt: skip
_VERBS = (
    "opened", "reviewed", "shipped", "described", "repaired", "recommended", "cancelled",
    "translated", "measured", "painted", "announced", "visited",
)  # fmt: skip
_OBJECTS = (
    "the quarterly report", "a wooden table", "the delivery schedule", "an unusual request",
    "the museum exhibition", "a short film", "the login page", "the garden path",
    "a birthday present", "the train timetable", "the insurance claim", "a cup of coffee",
)  # fmt: skip
_TAILS = (
    "before the meeting started", "after a long discussion", "without telling anyone",
    "because the weather was terrible", "while the children were asleep",
    "as soon as the doors opened", "in the middle of the night", "despite the heavy traffic",
    "with surprising patience", "for the second time this week",
)  # fmt: skip
_OPENERS = ("Yesterday", "In the morning", "Last year", "Unfortunately", "Surprisingly", "Then")


def _clause(rng: random.Random) -> str:
    words = [rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS)]
    if rng.random() < 0.6:
        words.append(rng.choice(_TAILS))
    return " ".join(words)


def sentence(rng: random.Random, max_clauses: int = 4) -> str:
    """One to ``max_clauses`` clauses: from about five words to a short paragraph."""
    clauses = [_clause(rng) for _ in range(rng.randint(1, max_clauses))]
    text = ", and ".join(clauses)
    if rng.random() < 0.4:
        text = f"{rng.choice(_OPENERS)}, {text}"
    text = text[0].upper() + text[1:]
    return text + rng.choice((".", ".", ".", "!", "?"))


def sentences(count: int, seed: int = 0, max_clauses: int = 4) -> list[str]:
    rng = random.Random(seed)
    return [sentence(rng, max_clauses) for _ in range(count)]


_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = (
    "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen",
)  # fmt: skip
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def spelled(number: int) -> str:
    """English words for 0..999 (enough for the phrases below)."""
    if number < 10:
        return _ONES[number]
    if number < 20:
        return _TEENS[number - 10]
    if number < 100:
        tens, ones = divmod(number, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    hundreds, rest = divmod(number, 100)
    return f"{_ONES[hundreds]} hundred" + (f" and {spelled(rest)}" if rest else "")


def number_phrase(rng: random.Random) -> str:
    """Prices, dates, quantities, percentages and spelled-out numbers, as in invoices and chat."""
    month = rng.choice(_MONTHS)
    templates = (
        lambda: (
            f"Order {rng.randint(1000, 99999)} of {rng.randint(1, 40)} items costs "
            f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}."
        ),
        lambda: (
            f"The meeting moved to {rng.randint(1, 28)} {month} {rng.randint(1990, 2030)} "
            f"at {rng.randint(7, 19)}:{rng.choice(('00', '15', '30', '45'))}."
        ),
        lambda: (
            f"Sales grew by {rng.randint(1, 99)}.{rng.randint(0, 9)}% to "
            f"{rng.randint(2, 900)} million in Q{rng.randint(1, 4)}."
        ),
        lambda: (
            f"Call {rng.randint(200, 999)}-{rng.randint(100, 999)}-{rng.randint(1000, 9999)} "
            f"before {rng.randint(1, 12)} pm."
        ),
        lambda: (
            f"We need {spelled(rng.randint(2, 999))} chairs and "
            f"{spelled(rng.randint(2, 99))} tables."
        ),
        lambda: (
            f"Room {rng.randint(1, 40)}{rng.choice('ABC')} holds {rng.randint(10, 500)} "
            f"people on {rng.randint(2, 12)} floors."
        ),
    )
    return rng.choice(templates)()


def number_phrases(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [number_phrase(rng) for _ in range(count)]
