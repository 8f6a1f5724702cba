"""triton_kit.benchmarks.bert.fusion's pure parts: flags, inputs and the table row."""

from __future__ import annotations

import numpy as np
import pytest

from triton_kit.benchmarks.bert import fusion


def test_flags_parse_into_settings() -> None:
    settings = fusion.parse_args(["--batch-sizes", "1,4", "--lengths", "16,256"])
    assert settings.batch_sizes == (1, 4)
    assert settings.lengths == (16, 256)
    assert fusion.parse_args([]) == fusion.Settings()


def test_feeds_are_full_length_bert_rows() -> None:
    feeds = fusion.feeds(3, 16)
    assert feeds["input_ids"].shape == (3, 16) and feeds["input_ids"].dtype == np.int64
    assert (feeds["input_ids"][:, 0] == 101).all() and (feeds["input_ids"][:, -1] == 102).all()
    assert (feeds["attention_mask"] == 1).all()


def test_row_speedup_is_unfused_over_fused() -> None:
    batch, length, unfused, fused, unfused_seqs, fused_seqs, ratio = fusion._row(
        8, 64, {"unfused": 20.0, "fused": 10.0}
    )
    assert (batch, length, unfused, fused) == (8, 64, 20.0, 10.0)
    assert unfused_seqs == pytest.approx(400.0) and fused_seqs == pytest.approx(800.0)
    assert ratio == pytest.approx(2.0)
