"""Find the ONNX file that a sibling model of the same repository serves.

Why: a python model that runs a graph in-process (``bert`` tokenises and encodes,
``nmt`` searches) saves a Triton round trip per call, and reading the sibling's
own file keeps ONE artefact per graph in the repository. When the sibling serves
something else (a TensorRT plan on a GPU host), there is no ONNX file and the
caller falls back to calling the sibling model through BLS.
"""

from __future__ import annotations

from pathlib import Path


def sibling_onnx(version_dir: Path, model: str, filename: str = "model.onnx") -> Path | None:
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
