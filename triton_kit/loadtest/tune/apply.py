"""``--apply``: write the chosen config's tuned fields into the repository, diff first.

Only the fields the search set (:attr:`SearchSpace.paths`) are taken from the chosen
variant Model Analyzer wrote; everything else in config.pbtxt stays as built. The same
fields are recorded in tuned.json beside the model (:mod:`triton_kit.build_engines.tuned`),
which the build reads back, so ``python -m triton_kit.build_engines`` keeps them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines import tuned


@dataclass(frozen=True)
class Change:
    """What --apply would write for one model."""

    model_dir: Path
    record: tuned.TunedFields
    before: str
    after: str

    @property
    def diff(self) -> str:
        name = f"{self.model_dir.name}/config.pbtxt"
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
        return "".join(lines)


def plan(model_dir: Path, variant_config: Path, paths: tuple[str, ...], source: str) -> Change:
    """The change that lays ``paths`` of the chosen variant over the model's config."""
    before = (model_dir / "config.pbtxt").read_text()
    current = text_format.Parse(before, mc.ModelConfig())
    chosen = text_format.Parse(variant_config.read_text(), mc.ModelConfig())
    record = tuned.pick(chosen, paths, source)
    after = text_format.MessageToString(record.apply(current))
    return Change(model_dir, record, before, after)


def write(change: Change) -> None:
    (change.model_dir / "config.pbtxt").write_text(change.after)
    tuned.write(change.model_dir, change.record)
