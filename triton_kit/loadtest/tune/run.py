"""Run ``model-analyzer profile`` for one model: its full log to a file, a line per config here.

Model Analyzer logs several hundred lines per model; the user sees one progress line per
measurement (config and concurrency, with the fields that config sets) and, on failure,
the end of the log.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from triton_kit.loadtest.tune.config import ModelRun
from triton_kit.loadtest.tune.environment import MODEL_ANALYZER_ENV
from triton_kit.loadtest.tune.errors import TuneError

_PROFILING = re.compile(r"Profiling (\S+): (.*)$")
_SETTING = re.compile(r"^\s*Setting (\S+) to (.*)$")
_CREATING = re.compile(r"(?:Creating|Found existing) model config: (\S+)")
_PREFIX = "[Model Analyzer] "


class Progress:
    """Turns Model Analyzer's log into ``[tune] model k/n: variant (fields) at concurrency``."""

    def __init__(self, model: str, total: int) -> None:
        self.model, self.total, self.done = model, total, 0
        self.settings: dict[str, list[str]] = {}
        self._current = ""

    def line(self, text: str) -> str | None:
        text = text.rstrip("\n").removeprefix(_PREFIX)
        if match := _CREATING.search(text):
            self._current = match.group(1)
            self.settings.setdefault(self._current, [])
        elif (match := _SETTING.match(text)) and self._current:
            self.settings[self._current].append(f"{match.group(1)}={match.group(2)}")
        elif match := _PROFILING.search(text):
            self.done += 1
            variant, load = match.groups()
            fields = "; ".join(self.settings.get(variant, [])) or "as built"
            return f"[tune] {self.model} {self.done}/{self.total}: {variant} ({fields}), {load}"
        elif "Existing measurement found" in text:
            self.done += 1
            return f"[tune] {self.model} {self.done}/{self.total}: measured before (checkpoint)"
        elif "Loaded checkpoint" in text or "Profile complete" in text:
            return f"[tune] {self.model}: {text.strip()}"
        return None


def profile(executable: Path, run: ModelRun, model: str, total: int) -> float:
    """Profile; returns the seconds it took. Raises TuneError with the log's end on failure."""
    progress = Progress(model, total)
    start = time.perf_counter()
    with run.log.open("a") as log:
        process = subprocess.Popen(
            [str(executable), "profile", "-f", str(run.yaml)],
            cwd=run.folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **MODEL_ANALYZER_ENV},
        )
        assert process.stdout is not None
        for text in process.stdout:
            log.write(text)
            if message := progress.line(text):
                print(message, flush=True)
        code = process.wait()
    if code != 0 or not run.csv.is_file():
        tail = "".join(run.log.read_text().splitlines(keepends=True)[-25:])
        raise TuneError(
            f"Model Analyzer failed for {model} (exit {code}); end of {run.log}:\n{tail}"
        )
    return time.perf_counter() - start
