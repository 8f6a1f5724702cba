"""The ONE place engines are registered: ``--engine`` name -> the module holding its step."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from build_engines.options import BuildOptions
    from build_engines.repository import ModelConfig


class Engine(Enum):
    """What a served ONNX model becomes.

    Each member is ``--engine`` NAME and the module (imported only when chosen) holding its
    step, :class:`EngineStep`. A new engine is one line here plus its module."""

    ONNXRUNTIME = "onnxruntime", "build_engines.onnxruntime_engine"
    TENSORRT = "tensorrt", "build_engines.tensorrt.engine"
    TORCH = "torch", "build_engines.torch_engine.engine"

    def __new__(cls, flag: str, module: str) -> Engine:
        member = object.__new__(cls)
        member._value_ = flag
        member.module = module
        return member

    def step(self) -> EngineStep:
        return importlib.import_module(self.module)  # type: ignore[return-value]


ENGINE_NAMES = [engine.value for engine in Engine]

# input name -> {axis: symbolic name}, as given to the ONNX export (dry runs before export).
DynamicAxes = Mapping[str, Mapping[int, str]]


class EngineStep(Protocol):
    """The functions an engine's module defines; each takes the typed build options."""

    FROM_SOURCE: bool  # True: built from the PyTorch source (no ONNX precision lowering)

    def validate(self, options: BuildOptions) -> None:
        """Refuse option combinations the engine cannot build (before any work)."""

    def check_available(self) -> None:
        """Fail fast where the engine's library is missing."""

    def artifacts(
        self, name: str, onnx_path: Path, config: ModelConfig, options: BuildOptions
    ) -> tuple[ModelConfig, dict[str, Path | bytes | str]]:
        """The served config and version-folder files from the (precision-lowered) ONNX."""

    def describe(
        self,
        name: str,
        onnx_path: Path,
        served: Path,
        config: ModelConfig,
        options: BuildOptions,
        dynamic_axes: DynamicAxes | None = None,
    ) -> list[str]:
        """Dry-run lines: what ``artifacts`` would build and write (``onnx_path`` may not
        exist yet: ``dynamic_axes`` then names its axes)."""
