"""Tuned config fields recorded beside a model, so a rebuild keeps what tuning chose.

``python -m triton_kit.loadtest tune --apply`` writes the fields Model Analyzer chose
(instance group, batch sizes, queue delay) into ``config.pbtxt`` and records them in
``tuned.json`` in the same folder; :func:`triton_kit.build_engines.repository.write_model`
reads that record before it replaces the folder and lays the fields over the freshly built
config. The record holds field paths and values as Triton's own ``ModelConfig`` (JSON form),
and the merge is protobuf's ``FieldMask`` merge, so only the named fields change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import field_mask_pb2, json_format
from tritonclient.grpc import model_config_pb2 as mc

TUNED_FILE = "tuned.json"


@dataclass(frozen=True)
class TunedFields:
    """Which fields of a model's config were tuned, their values, and where they came from."""

    paths: tuple[str, ...]
    values: mc.ModelConfig
    source: str = ""

    def apply(self, config: mc.ModelConfig) -> mc.ModelConfig:
        """A copy of ``config`` with the tuned fields replaced (repeated fields too)."""
        merged = mc.ModelConfig()
        merged.CopyFrom(config)
        mask = field_mask_pb2.FieldMask(paths=list(self.paths))
        mask.MergeMessage(
            self.values, merged, replace_message_field=True, replace_repeated_field=True
        )
        return merged

    def to_json(self) -> str:
        body = {
            "fields": list(self.paths),
            "values": json_format.MessageToDict(self.values),
            "source": self.source,
        }
        return json.dumps(body, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TunedFields:
        body = json.loads(text)
        values = json_format.ParseDict(body["values"], mc.ModelConfig())
        return cls(tuple(body["fields"]), values, body.get("source", ""))


def pick(config: mc.ModelConfig, paths: Iterable[str], source: str = "") -> TunedFields:
    """The ``paths`` of ``config`` (a tuned variant) as a record."""
    paths = tuple(paths)
    values = mc.ModelConfig()
    field_mask_pb2.FieldMask(paths=list(paths)).MergeMessage(
        config, values, replace_message_field=True, replace_repeated_field=True
    )
    return TunedFields(paths, values, source)


def read(model_dir: Path) -> TunedFields | None:
    path = Path(model_dir) / TUNED_FILE
    return TunedFields.from_json(path.read_text()) if path.is_file() else None


def write(model_dir: Path, tuned: TunedFields) -> Path:
    path = Path(model_dir) / TUNED_FILE
    path.write_text(tuned.to_json())
    return path
