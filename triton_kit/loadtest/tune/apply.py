"""``--apply``: write the chosen config's tuned fields into the repository, diff first.

Only the fields the search set (:attr:`SearchSpace.paths`) are taken from the chosen
variant Model Analyzer wrote; everything else in config.pbtxt stays as built. The same
fields are recorded in tuned.json beside the model (:mod:`triton_kit.build_engines.tuned`),
which the build reads back, so ``python -m triton_kit.build_engines`` keeps them.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines import tuned
from triton_kit.loadtest.tune.errors import TuneError


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


def write_all(changes: list[Change]) -> None:
    """Every change or none: each file a change touches is read first, and a failure on any
    model puts back every file already written, so the repository is never half tuned."""
    paths = [c.model_dir / name for c in changes for name in ("config.pbtxt", tuned.TUNED_FILE)]
    saved = {path: path.read_bytes() if path.is_file() else None for path in paths}
    try:
        for change in changes:
            text_format.Parse(change.after, mc.ModelConfig())  # what is written must parse
            _replace(change.model_dir / "config.pbtxt", change.after.encode())
            tuned.write(change.model_dir, change.record)
    except (OSError, text_format.ParseError) as exc:
        _restore(saved)
        raise TuneError(f"--apply failed ({exc}); nothing applied") from exc


def _replace(path: Path, data: bytes) -> None:
    """Write beside, then rename: a reader never sees a half-written config."""
    temporary = path.with_name(f".{path.name}.tune-tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _restore(saved: dict[Path, bytes | None]) -> None:
    for path, data in saved.items():
        if data is None:
            if path.is_file():
                path.unlink()
        elif not path.is_file() or path.read_bytes() != data:
            _replace(path, data)
