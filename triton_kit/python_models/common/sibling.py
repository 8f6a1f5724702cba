"""Find the file that a sibling model of the same repository serves, and its device.

Why: a python model that runs a graph in-process (``nmt``'s search over its encoder and
decoder steps) saves a Triton round trip per call, and reading the sibling's
own file keeps ONE artefact per graph in the repository. When the sibling serves
something else (a TensorRT plan on a GPU host), there is no ONNX file and the
caller falls back to calling the sibling model through BLS.
"""

from __future__ import annotations

import re
from pathlib import Path

_GPU_KIND = re.compile(r"kind:\s*KIND_GPU")


def sibling_file(version_dir: Path, model: str, filename: str = "model.onnx") -> Path | None:
    """``<repository>/<model>/<highest version>/<filename>`` if it exists, else None.

    ``version_dir`` is the calling model's ``<repository>/<name>/<version>``.
    """
    model_dir = Path(version_dir).parent.parent / model
    versions = sorted(
        (int(p.name), p) for p in model_dir.glob("*") if p.is_dir() and p.name.isdigit()
    )
    if not versions:
        return None
    path = versions[-1][1] / filename  # Triton's default policy serves the highest version
    return path if path.is_file() else None


def sibling_device(version_dir: Path, model: str) -> str:
    """``cuda`` where the sibling's config asks for a GPU instance and one is visible."""
    import torch

    config = Path(version_dir).parent.parent / model / "config.pbtxt"
    wants_gpu = config.is_file() and bool(_GPU_KIND.search(config.read_text()))
    if wants_gpu and not torch.cuda.is_available():
        raise RuntimeError(
            f"{model} was built for a GPU (KIND_GPU) but no GPU is visible; rebuild it with "
            "`python -m triton_kit.build_engines <family> --engine torch` on this host"
        )
    return "cuda" if wants_gpu else "cpu"
