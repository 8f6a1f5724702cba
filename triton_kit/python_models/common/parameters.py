"""Typed access to a model config's ``parameters`` block.

Triton stores every parameter as ``{"string_value": "..."}``; parsing them in one
place avoids the classic ``bool("false") is True`` bug.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ParameterError(ValueError):
    """A parameter in config.pbtxt is missing or malformed."""


class ModelParameters:
    """Read-only view of ``parameters`` with typed getters that name the bad key."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    @classmethod
    def from_config(cls, model_config: Mapping[str, Any]) -> ModelParameters:
        raw = model_config.get("parameters") or {}
        return cls({key: str(value.get("string_value", "")) for key, value in raw.items()})

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def as_dict(self) -> dict[str, str]:
        return dict(self._values)

    def _get(self, key: str, default: Any) -> str | None:
        if key in self._values:
            return self._values[key].strip()
        if default is _REQUIRED:
            raise ParameterError(f"config.pbtxt parameter '{key}' is required")
        return None

    def str(self, key: str, default: Any = None) -> str:
        value = self._get(key, _REQUIRED if default is None else default)
        return value if value is not None else default

    def int(self, key: str, default: Any = None) -> int:
        value = self._get(key, _REQUIRED if default is None else default)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError as exc:
            raise ParameterError(f"parameter '{key}' must be an integer, got {value!r}") from exc

    def float(self, key: str, default: Any = None) -> float:
        value = self._get(key, _REQUIRED if default is None else default)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError as exc:
            raise ParameterError(f"parameter '{key}' must be a number, got {value!r}") from exc

    def bool(self, key: str, default: Any = None) -> bool:
        value = self._get(key, _REQUIRED if default is None else default)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ParameterError(f"parameter '{key}' must be true or false, got {value!r}")

    def int_list(self, key: str, default: Any = None) -> list[int]:
        value = self._get(key, _REQUIRED if default is None else default)
        if value is None:
            return list(default)
        try:
            return [int(part) for part in value.replace(" ", "").split(",") if part]
        except ValueError as exc:
            raise ParameterError(
                f"parameter '{key}' must be comma-separated integers, got {value!r}"
            ) from exc


_REQUIRED = object()
