"""The ctranslate2 engine: a whole Marian translation model converted by CTranslate2, served
by the kit's own ``ctranslate2`` Triton backend (nmt only:
:mod:`triton_kit.build_engines.families.nmt.ct2_engine`).

Registered as ``Engine.CTRANSLATE2`` in :mod:`triton_kit.build_engines.engines.registry`. It
builds from the checkpoint, not from an ONNX step graph, so a family that serves ONNX step
models (resnet50, bert) has nothing it can take: ``artifacts`` refuses them.
"""

from __future__ import annotations

from pathlib import Path

from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import ModelConfig
from triton_kit.build_engines.steps import BuildError

FROM_SOURCE = True
PRECISIONS = ("int8", "fp32")
SERVE_COMMAND = "python -m triton_kit.server.native_backends build ctranslate2"


def validate(options: BuildOptions) -> None:
    if options.precision not in PRECISIONS:
        raise BuildError(
            f"--engine ctranslate2 builds {' or '.join(PRECISIONS)} (CTranslate2's int8 or "
            f"float32 weights), not {options.precision}"
        )


def check_available() -> None:
    try:
        import ctranslate2  # noqa: F401
    except ImportError as exc:
        raise BuildError(
            "--engine ctranslate2 needs the ctranslate2 package (pip install '.[build]')"
        ) from exc


def artifacts(
    name: str,
    onnx_path: Path,
    config: ModelConfig,
    options: BuildOptions,
    source: tuple | None = None,
) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
    raise BuildError(
        f"{name}: --engine ctranslate2 converts a whole Marian model (build_engines nmt), "
        "not an ONNX graph"
    )


def describe(
    name: str,
    onnx_path: Path,
    served: Path,
    config: ModelConfig,
    options: BuildOptions,
    dynamic_axes=None,
) -> list[str]:
    return [f"{name}: --engine ctranslate2 serves nmt only (nmt_ct2); nothing for {name}"]
