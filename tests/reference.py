"""In-process reference pipelines: the same pre-processing plus ONNX Runtime on the same file."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import onnxruntime as ort

from python_models.image import preprocess_bytes, top_k


@lru_cache(maxsize=4)
def onnx_session(path: str) -> ort.InferenceSession:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def resnet50_reference(repository: Path, data: bytes, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    session = onnx_session(str(repository / "resnet50_model" / "1" / "model.onnx"))
    pixels = preprocess_bytes(data)[None]
    (logits,) = session.run(["logits"], {"pixel_values": pixels})
    ids, scores = top_k(logits, k)
    return ids[0], scores[0]
