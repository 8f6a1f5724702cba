"""The GPU serving benchmark: how many alternating rounds its launcher step measures (two
2-second rounds read 0.92 on the H100 where earlier runs read 1.01-1.07, issue 30's goals,
session 41: the count is the user's to raise), and its results file, which keeps what a run
stopped midway measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triton_kit.benchmarks import launcher
from triton_kit.benchmarks.gpu import serving


def test_the_launcher_step_measures_the_rounds_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert serving.parse(["--out", str(tmp_path)]).launcher_rounds == 2
    options = serving.parse(["--out", str(tmp_path), "--launcher-rounds", "4"])
    seen: list[launcher.Options] = []
    monkeypatch.setattr(launcher, "compare", lambda o: seen.append(o) or {})
    repo = tmp_path / "repo"
    (repo / "native_i4_d2000p" / "1").mkdir(parents=True)
    grid = (serving.Variant("native_i4_d2000p", 4, 2000),)
    serving.launcher_row(repo, grid, options)
    assert seen[0].rounds == 4 and seen[0].model == "native_i4_d2000p"
    with pytest.raises(SystemExit):
        serving.parse(["--out", str(tmp_path), "--launcher-rounds", "0"])


def test_a_recorded_row_is_in_the_file_before_its_step_ends(tmp_path: Path) -> None:
    """A device call's deadline stopped benchmarks.gpu.aoti's served step twice in session 43,
    and its JSON held none of the rows measured (they were in the log alone): a row recorded
    during a step is written at once, and the step's own value replaces them when it ends."""
    results = serving.Results(tmp_path, {"family": "resnet50"}, name="aoti.json")

    def step() -> dict:
        results.record("served", "aoti_i4_c256", {"items_per_s": 19_000.0})
        written = json.loads((tmp_path / "aoti.json").read_text())
        assert written["served"] == {"aoti_i4_c256": {"items_per_s": 19_000.0}}
        return {"aoti_i4_c256": {"items_per_s": 19_000.0}, "aoti_i4_server_alive": True}

    results.step("served", step)
    assert json.loads((tmp_path / "aoti.json").read_text())["served"]["aoti_i4_server_alive"]
