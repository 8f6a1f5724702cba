"""What an engine's module defines (:class:`EngineStep`), and the step of a chosen engine.

Apart from :mod:`triton_kit.build_engines.engines.registry` so that the options can name an engine
without the registry importing the options back."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.steps import BuildError

if TYPE_CHECKING:
    from triton_kit.build_engines.options import BuildOptions
    from triton_kit.build_engines.repository import ModelConfig


def step_of(engine: Engine) -> EngineStep:
    """The engine's step module, imported only now (TensorRT, torch: heavy or absent)."""
    return importlib.import_module(engine.module)  # type: ignore[return-value]


def pytorch_source(name: str, flag: str, families: str, source: tuple | None) -> tuple:
    """(module, feeds, more parity feeds) of a model's PyTorch ``source`` (module, feeds[,
    more feeds]), for the engines built from it; refused where there is none (a user-given
    ONNX), naming the ``families`` that have one."""
    if source is None:
        raise BuildError(
            f"{name}: {flag} needs the model's PyTorch source ({families}; a user-given ONNX "
            "has none)"
        )
    module, feeds, *more = source
    return module, feeds, (more[0] if more else ())


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
