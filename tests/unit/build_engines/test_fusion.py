"""The fusion step's pure logic: when it runs, what it records, what it refuses."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from triton_kit.build_engines.engines import fusion
from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.families.bert import BertOptions, add_arguments, options_from


def test_runs_for_fp32_onnxruntime_only() -> None:
    assert fusion.skip_reason(True, "fp32", Engine.ONNXRUNTIME) is None
    assert "--no-fusion" in fusion.skip_reason(False, "fp32", Engine.ONNXRUNTIME)
    assert "torch" in fusion.skip_reason(True, "fp32", Engine.TORCH)
    assert "tensorrt" in fusion.skip_reason(True, "fp32", Engine.TENSORRT)
    for precision in ("fp16", "int8", "int8-dynamic"):
        reason = fusion.skip_reason(True, precision, Engine.ONNXRUNTIME)
        assert reason.startswith(f"fp32 only, not {precision}: ")
        assert reason.endswith(fusion.WHY_FP32_ONLY[precision])


def _graph_with(*ops: tuple[str, str]):
    nodes = [
        helper.make_node(op, ["x"], [f"y{i}"], domain=domain) for i, (domain, op) in enumerate(ops)
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, [1]) for n in nodes]
    return helper.make_model(helper.make_graph(nodes, "g", [x], outputs))


def test_counts_only_contrib_ops_sorted() -> None:
    model = _graph_with(
        ("com.microsoft", "SkipLayerNormalization"),
        ("", "MatMul"),
        ("com.microsoft", "Attention"),
        ("com.microsoft", "SkipLayerNormalization"),
    )
    counts = fusion.contrib_op_counts(model)
    assert counts == {"Attention": 1, "SkipLayerNormalization": 2}
    assert fusion.describe(counts) == "Attention 1, SkipLayerNormalization 2"
    assert fusion.describe({}) == "none"


def test_refuses_ops_outside_the_portable_set() -> None:
    fusion.check_portable({"Attention": 6, "BiasGelu": 6})
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*--no-fusion"):
        fusion.check_portable({"Attention": 6, "MultiHeadAttention": 1})


def test_tolerance_fails_large_and_nan_differences() -> None:
    fusion.check_close(2e-7)
    with pytest.raises(ValueError, match="differs"):
        fusion.check_close(3e-3)
    with pytest.raises(ValueError, match="differs"):
        fusion.check_close(math.nan)


def test_recorded_parameters() -> None:
    fused = fusion.Fused(Path("m.onnx"), {"Attention": 6}, 2.2e-7)
    assert fusion.parameters(fused, None) == {
        "fusion": "onnxruntime.transformers opt_level 0: Attention 6",
        "fused_vs_unfused_max_abs_diff": "2.2e-07",
    }
    assert fusion.parameters(None, "turned off (--no-fusion)") == {
        "fusion": "off: turned off (--no-fusion)"
    }


@pytest.mark.parametrize(("argv", "expected"), [([], True), (["--no-fusion"], False)])
def test_flag_defaults_to_the_dataclass(argv: list[str], expected: bool) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert options_from(parser.parse_args(argv)).fusion is expected
    assert BertOptions().fusion is True
