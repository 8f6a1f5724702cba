"""ResNet-50 pre- and post-processing: pure functions plus their Triton models.

The functions are the single definition of the pipeline: the Triton models call
them, and tests and benchmarks call them in-process for the reference result.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from python_models.base import Arrays, InvalidInput, PythonModel
from python_models.contracts import CLASS_IDS, LABELS, SCORES

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


def decode_image(data: bytes, limits: ImageLimits = ImageLimits()) -> Image.Image:
    """Bytes to an RGB PIL image, with a reason for every rejection."""
    if not data:
        raise InvalidInput("IMAGE is empty (0 bytes)")
    if len(data) > limits.max_bytes:
        raise InvalidInput(f"IMAGE is {len(data)} bytes; the limit is {limits.max_bytes} bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if width * height > limits.max_pixels:
                raise InvalidInput(
                    f"image is {width}x{height} = {width * height} pixels; "
                    f"the limit is {limits.max_pixels} pixels"
                )
            if min(width, height) < limits.min_side:
                raise InvalidInput(
                    f"image is {width}x{height} pixels; each side must be at least "
                    f"{limits.min_side} pixels"
                )
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


def preprocess(image: Image.Image, spec: PreprocessSpec = PreprocessSpec()) -> np.ndarray:
    """Resize shorter side (bilinear), centre-crop, scale to [0,1], ImageNet-normalise; CHW."""
    width, height = image.size
    scale = spec.resize_shorter / min(width, height)
    size = (max(spec.crop, round(width * scale)), max(spec.crop, round(height * scale)))
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


def _as_bytes(item: object) -> bytes:
    return item if isinstance(item, bytes) else bytes(item)


class ImagePreprocessor(PythonModel):
    """IMAGE (encoded bytes) -> PIXELS (FP32 [3, crop, crop])."""

    def setup(self) -> None:
        self.spec = PreprocessSpec(
            resize_shorter=self.params.int("resize_shorter", 256),
            crop=self.params.int("crop", 224),
        )
        self.limits = ImageLimits(
            max_bytes=self.params.int("max_image_bytes", ImageLimits.max_bytes),
            max_pixels=self.params.int("max_image_pixels", ImageLimits.max_pixels),
            min_side=self.params.int("min_image_side", ImageLimits.min_side),
        )
        # PIL's bomb guard follows the configured limit (warning above it, error at 2x).
        Image.MAX_IMAGE_PIXELS = self.limits.max_pixels

    def process_one(self, inputs: Arrays) -> Arrays:
        items = inputs["IMAGE"].reshape(-1)
        pixels = [preprocess_bytes(_as_bytes(item), self.spec, self.limits) for item in items]
        return {"PIXELS": np.stack(pixels)}


class TopKPostprocessor(PythonModel):
    """LOGITS -> CLASS_IDS, SCORES (softmax, descending) and LABELS."""

    def setup(self) -> None:
        self.k = self.params.int("top_k", 5)
        labels_file = self.version_dir / self.params.str("labels_file", "labels.txt")
        labels = labels_file.read_text(encoding="utf-8").splitlines()
        self.labels = np.array([label.encode("utf-8") for label in labels], dtype=np.object_)

    def process_one(self, inputs: Arrays) -> Arrays:
        ids, scores = top_k(inputs["LOGITS"], self.k)
        return {CLASS_IDS: ids, SCORES: scores, LABELS: self.labels[ids]}
