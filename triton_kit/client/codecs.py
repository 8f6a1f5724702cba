"""Turn user values into request tensors and response tensors into typed results.

Pure functions shared by the sync and async clients, so both protocols and both
styles encode and decode identically.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np
import numpy.typing as npt

from triton_kit.client.errors import InvalidInputError
from triton_kit.client.types import Classification, Prediction

if TYPE_CHECKING:
    from PIL import Image

# Encoded (bytes, a file path) or decoded (RGB uint8 [height, width, 3], a PIL image).
ImageInput = Union[bytes, bytearray, str, "os.PathLike[str]", "Image.Image", npt.NDArray[np.uint8]]
CLASSIFY_OUTPUTS = ("CLASS_IDS", "SCORES", "LABELS")
MAX_TOP_K = 5
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class Call:
    """One inference: the model, its named input arrays and the outputs wanted."""

    model: str
    inputs: Mapping[str, np.ndarray]
    outputs: tuple[str, ...]


def image_bytes(image: ImageInput) -> bytes:
    """Bytes are sent as they are; a path is read; a PIL image is encoded as PNG (lossless).

    Raises InvalidInputError for a missing/unreadable file or an unsupported type.
    """
    if isinstance(image, (bytes, bytearray)):
        return bytes(image)
    if isinstance(image, (str, os.PathLike)):
        try:
            return Path(image).read_bytes()
        except OSError as exc:
            raise InvalidInputError(
                f"cannot read image file {str(image)!r}: {exc.strerror or exc}",
                "INVALID_ARGUMENT",
            ) from exc
    if isinstance(image, np.ndarray) or not callable(getattr(image, "save", None)):
        raise InvalidInputError(
            f"unsupported image type {type(image).__name__}: pass encoded bytes, a file path, "
            "a PIL image or a uint8 RGB [height, width, 3] numpy array",
            "INVALID_ARGUMENT",
        )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def check_int(name: str, value: object, low: int, high: int = INT32_MAX) -> int:
    """Reject what the wire's int32 would silently wrap, before anything is sent.

    The server checks the meaningful range (e.g. BEAM_SIZE 1..max) and names it.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(
            f"{name} must be an integer, got {type(value).__name__}", "INVALID_ARGUMENT"
        )
    if not low <= int(value) <= high:
        raise InvalidInputError(
            f"{name} must be between {low} and {high}, got {value}", "INVALID_ARGUMENT"
        )
    return int(value)


def _bytes_tensor(value: bytes) -> np.ndarray:
    # np.object_ keeps trailing zero bytes that np.bytes_ would strip.
    return np.array([[value]], dtype=np.object_)


def is_pil_image(value: object) -> bool:
    """A PIL image (PIL is imported only if the caller made one: no import here)."""
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(value, pil.Image)


def rgb_pixels(image: object) -> np.ndarray:
    """A decoded image as the contiguous RGB uint8 [height, width, 3] array the server takes.

    numpy arrays must already be that (nothing is guessed: no scaling of floats, no
    channel reordering); PIL images of any mode are converted to RGB as the server
    converts decoded files. Raises InvalidInputError naming what is wrong, before sending.
    """
    if is_pil_image(image):
        try:
            image = np.asarray(image.convert("RGB"))  # type: ignore[attr-defined]
        except (OSError, ValueError) as exc:
            raise InvalidInputError(
                f"cannot convert the PIL image to RGB: {exc}", "INVALID_ARGUMENT"
            ) from exc
    if not isinstance(image, np.ndarray):
        raise InvalidInputError(
            f"expected a numpy array or a PIL image, got {type(image).__name__}",
            "INVALID_ARGUMENT",
        )
    described = f"{image.dtype} ndarray of shape {image.shape}"
    if image.dtype != np.uint8:
        raise InvalidInputError(
            f"an image array must have dtype uint8 (RGB values 0..255), got a {described}",
            "INVALID_ARGUMENT",
        )
    if image.ndim != 3:
        hint = "; pass one image per item of classify_batch" if image.ndim == 4 else ""
        raise InvalidInputError(
            f"an image array must be one RGB image [height, width, 3], got a {described}{hint}",
            "INVALID_ARGUMENT",
        )
    if image.shape[2] != 3:
        raise InvalidInputError(
            f"an image array must have 3 channels (RGB) in its last axis, got a {described}",
            "INVALID_ARGUMENT",
        )
    return np.ascontiguousarray(image)


def classify_call(
    image: ImageInput,
    top_k: int,
    model: str = "resnet50",
    uint8_model: str = "resnet50_uint8",
) -> Call:
    """Encoded images go to ``model`` (IMAGE, BYTES); decoded ones to ``uint8_model``
    (IMAGE_UINT8, uint8 [1, height, width, 3]), so the server does not decode them again."""
    check_int("top_k", top_k, 1, MAX_TOP_K)
    if isinstance(image, np.ndarray) or is_pil_image(image):
        return Call(uint8_model, {"IMAGE_UINT8": rgb_pixels(image)[None]}, CLASSIFY_OUTPUTS)
    return Call(model, {"IMAGE": _bytes_tensor(image_bytes(image))}, CLASSIFY_OUTPUTS)


def parse_classification(outputs: Mapping[str, np.ndarray], top_k: int) -> Classification:
    ids = outputs["CLASS_IDS"].reshape(-1)[:top_k]
    scores = outputs["SCORES"].reshape(-1)[:top_k]
    labels = outputs["LABELS"].reshape(-1)[:top_k]
    return Classification(
        tuple(
            Prediction(int(i), _text(label), float(s))
            for i, s, label in zip(ids, scores, labels, strict=True)
        )
    )


def embed_call(text: str | bytes, model: str = "bert") -> Call:
    return Call(model, {"TEXT": _bytes_tensor(_utf8(text))}, ("EMBEDDING",))


def parse_embedding(outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    return outputs["EMBEDDING"].reshape(-1).astype(np.float32, copy=False)


def translate_call(
    text: str | bytes, beam_size: int | None, max_length: int | None, model: str = "nmt"
) -> Call:
    inputs: dict[str, np.ndarray] = {"TEXT": _bytes_tensor(_utf8(text))}
    if beam_size is not None:
        beam = check_int("beam_size (BEAM_SIZE)", beam_size, INT32_MIN)
        inputs["BEAM_SIZE"] = np.array([[beam]], dtype=np.int32)
    if max_length is not None:
        length = check_int("max_length (MAX_LENGTH)", max_length, INT32_MIN)
        inputs["MAX_LENGTH"] = np.array([[length]], dtype=np.int32)
    return Call(model, inputs, ("TRANSLATION",))


def parse_translation(outputs: Mapping[str, np.ndarray]) -> str:
    return _text(outputs["TRANSLATION"].reshape(-1)[0])


def _utf8(text: str | bytes) -> bytes:
    """Strings are UTF-8 encoded; bytes pass through untouched (the server validates them)."""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text)
    if not isinstance(text, str):
        raise InvalidInputError(
            f"text must be str or bytes, got {type(text).__name__}", "INVALID_ARGUMENT"
        )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        message = f"text is not encodable as UTF-8: {exc}"
        raise InvalidInputError(message, "INVALID_ARGUMENT") from exc


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
