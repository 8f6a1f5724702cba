"""ResNet-50 pre- and post-processing as pure functions.

The single definition of the pipeline: the Triton models
(:mod:`triton_kit.python_models.resnet50.model`) call them, and tests and benchmarks call them
in-process for the reference result.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from triton_kit.python_models.common.base import InvalidInput

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@dataclass(frozen=True)
class ImageLimits:
    """What the pre-processor accepts; over-limit images are rejected, not resized."""

    max_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    min_side: int = 8


@dataclass(frozen=True)
class PreprocessSpec:
    resize_shorter: int = 256
    crop: int = 224


def check_size(width: int, height: int, limits: ImageLimits) -> None:
    if width * height > limits.max_pixels:
        raise InvalidInput(
            f"image is {width}x{height} = {width * height} pixels; "
            f"the limit is {limits.max_pixels} pixels"
        )
    if min(width, height) < limits.min_side:
        raise InvalidInput(
            f"image is {width}x{height} pixels; each side must be at least {limits.min_side} pixels"
        )


def decode_image(
    data: bytes, limits: ImageLimits = ImageLimits(), load: bool = True
) -> Image.Image:
    """Bytes to an RGB PIL image, with a reason for every rejection.

    ``load=False`` checks the header only (size limits) and returns the unloaded image:
    the GPU path decodes the pixels itself.
    """
    if not data:
        raise InvalidInput("IMAGE is empty (0 bytes)")
    if len(data) > limits.max_bytes:
        raise InvalidInput(f"IMAGE is {len(data)} bytes; the limit is {limits.max_bytes} bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            check_size(*image.size, limits)
            if not load:
                return image
            image.load()
    except InvalidInput:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        # PIL's own guard fires inside Image.open, before our size check can run.
        raise InvalidInput(
            f"image header claims too many pixels; the limit is {limits.max_pixels} pixels"
        ) from exc
    except UnidentifiedImageError as exc:
        raise InvalidInput(
            f"IMAGE is not a decodable image ({len(data)} bytes, starts with {data[:8]!r}); "
            "send JPEG, PNG or WebP bytes"
        ) from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise InvalidInput(f"IMAGE could not be decoded ({image_format(data)}): {exc}") from exc
    return image.convert("RGB")


def image_format(data: bytes) -> str:
    try:
        return Image.open(io.BytesIO(data)).format or "unknown format"
    except Exception:
        return "unknown format"


def resized_size(width: int, height: int, spec: PreprocessSpec) -> tuple[int, int]:
    """(width, height) with the shorter side at ``resize_shorter``, neither below the crop."""
    scale = spec.resize_shorter / min(width, height)
    return max(spec.crop, round(width * scale)), max(spec.crop, round(height * scale))


def preprocess(image: Image.Image, spec: PreprocessSpec = PreprocessSpec()) -> np.ndarray:
    """Resize shorter side (bilinear), centre-crop, scale to [0,1], ImageNet-normalise; CHW."""
    size = resized_size(*image.size, spec)
    resized = image.resize(size, Image.BILINEAR)
    left = (size[0] - spec.crop) // 2
    top = (size[1] - spec.crop) // 2
    cropped = resized.crop((left, top, left + spec.crop, top + spec.crop))
    pixels = np.asarray(cropped, dtype=np.float32) / 255.0
    pixels = (pixels - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(pixels.transpose(2, 0, 1), dtype=np.float32)


def preprocess_bytes(
    data: bytes, spec: PreprocessSpec = PreprocessSpec(), limits: ImageLimits = ImageLimits()
) -> np.ndarray:
    return preprocess(decode_image(data, limits), spec)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float32) - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Class ids and softmax probabilities, descending; ties keep the lower id first."""
    probs = softmax(logits)
    ids = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    return ids.astype(np.int64), np.take_along_axis(probs, ids, axis=-1)
