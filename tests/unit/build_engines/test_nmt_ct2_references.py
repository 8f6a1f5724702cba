"""``--engine ctranslate2`` counts exact translations only where the checkpoint has reference
translations (the number models' held-out split): another checkpoint's verify targets are its
own sources (opus-mt-en-de, the benchmark's random Marian), which no translation equals."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from triton_kit.build_engines.families.nmt.architecture import Verification
from triton_kit.build_engines.families.nmt.ct2_engine import check_translations
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.transformer import TRANSFORMER
from triton_kit.build_engines.steps import BuildError


def test_only_a_checkpoint_with_its_split_has_references(tmp_path: Path) -> None:
    assert TRANSFORMER.verification(DEFAULT_CHECKPOINT, 2).references
    other = TRANSFORMER.verification(tmp_path, 2)  # no split.json
    assert not other.references
    assert list(other.targets) == list(other.sources)


class _Translator:
    """ctranslate2.Translator's shape: every sentence translated as ``▁one``."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def translate_batch(self, sources, **kwargs):
        return [types.SimpleNamespace(hypotheses=[["▁one"]]) for _ in sources]


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setitem(sys.modules, "ctranslate2", types.SimpleNamespace(Translator=_Translator))
    pieces = json.loads((DEFAULT_CHECKPOINT / "vocab.json").read_text("utf-8"))
    vocabulary = sorted(pieces, key=pieces.__getitem__)
    (tmp_path / "shared_vocabulary.json").write_text(json.dumps(vocabulary), "utf-8")
    return tmp_path


LIMITS = types.SimpleNamespace(max_source_length=512, default_max_length=32)


@pytest.mark.parametrize("references", [True, False])
def test_the_exact_count_needs_references(model_dir: Path, references: bool) -> None:
    sentences = Verification(["two", "three"], ["two", "three"], references=references)
    if references:
        with pytest.raises(BuildError, match="0/2 exact"):
            check_translations(model_dir, DEFAULT_CHECKPOINT, "int8", sentences, LIMITS, 1)
    else:
        check_translations(model_dir, DEFAULT_CHECKPOINT, "int8", sentences, LIMITS, 1)
