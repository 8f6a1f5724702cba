"""FP16 and INT8 lowering of a small real network, run with ONNX Runtime (no mocks).

The network has what the three families have: convolutions, a LayerNorm, a
softmax and matmuls, so the FP32-kept ops, per-channel weights and symmetric
activations are all exercised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from triton_kit.build_engines import serving
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.precision import CalibrationSettings, to_fp16, to_int8
from triton_kit.build_engines.precision import step as precision_step
from triton_kit.build_engines.precision.int8 import FeedsReader, cache_path_for
from triton_kit.build_engines.precision.report import (
    accuracy_report,
    bleu,
    cosine_rows,
    exact_match,
    topk_agreement,
)
from triton_kit.build_engines.repository import Tensor, onnx_model_config


def _feeds(count: int, seed: int, batch: int = 2):
    rng = np.random.default_rng(seed)
    return [
        {"image": rng.standard_normal((batch, 3, 16, 16), dtype=np.float32)} for _ in range(count)
    ]


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from triton_kit.build_engines.engines.onnx_export import export

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
            self.norm = torch.nn.LayerNorm(32)
            self.attn = torch.nn.Linear(32, 32)
            self.head = torch.nn.Linear(32, 10)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.conv2(torch.relu(self.conv1(image))))  # [b, 32, 8, 8]
            tokens = self.norm(x.flatten(2).transpose(1, 2))  # [b, 64, 32]
            weights = torch.softmax(tokens @ self.attn(tokens).transpose(1, 2) / 5.0, dim=-1)
            return self.head((weights @ tokens).mean(dim=1))  # [b, 10]

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny") / "model.onnx"
    example = (torch.from_numpy(_feeds(1, 0)[0]["image"]),)
    return export(
        Tiny(),
        example,
        path,
        ["image"],
        ["logits"],
        {"image": {0: "batch"}, "logits": {0: "batch"}},
    )


def _value_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.value_info, *graph.input]}
    types.update({v.name: v.type.tensor_type.elem_type for v in graph.output})
    types.update({i.name: i.data_type for i in graph.initializer})
    return types


# -- FP16 --------------------------------------------------------------------------------


def test_fp16_keeps_fp32_io_and_sensitive_ops(tiny_onnx: Path, tmp_path: Path) -> None:
    path = to_fp16(tiny_onnx, tmp_path / "model.fp16.onnx")
    model = onnx.load(str(path))
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [TensorProto.FLOAT]
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [TensorProto.FLOAT]
    types = _value_types(model)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert convs and all(types[n.input[1]] == TensorProto.FLOAT16 for n in convs)
    sensitive = [n for n in model.graph.node if n.op_type in ("LayerNormalization", "Softmax")]
    assert {n.op_type for n in sensitive} == {"LayerNormalization", "Softmax"}
    for node in sensitive:
        assert types[node.input[0]] == TensorProto.FLOAT, f"{node.op_type} runs in FP16"


def test_fp16_matches_fp32(tiny_onnx: Path, tmp_path: Path) -> None:
    path = to_fp16(tiny_onnx, tmp_path / "model.fp16.onnx")
    report = accuracy_report(tiny_onnx, path, _feeds(4, 1))
    logits = report["outputs"]["logits"]
    assert logits["min_cosine"] > 0.9999
    assert logits["max_abs_error"] < 1e-2 * max(1.0, logits["max_abs_reference"])


# -- INT8 --------------------------------------------------------------------------------


def _int8(tiny_onnx: Path, tmp_path: Path, method: str = "minmax", size: int = 8):
    settings = CalibrationSettings(method=method, size=size)
    cache = cache_path_for(tmp_path / "cache", "ab" * 32, settings)
    return to_int8(
        tiny_onnx, tmp_path / f"model.{method}.onnx", lambda: _feeds(20, 2), settings, cache
    )


def test_int8_is_qdq_per_channel_and_symmetric(tiny_onnx: Path, tmp_path: Path) -> None:
    result = _int8(tiny_onnx, tmp_path)
    model = onnx.load(str(result.path))
    ops = [n.op_type for n in model.graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [TensorProto.FLOAT]
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    for node in qdq:
        zero_point = inits[node.input[2]]
        assert zero_point.dtype == np.int8 and not zero_point.any(), f"{node.name} is asymmetric"
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert all(inits[n.input[2]].dtype == np.float32 for n in convs), "biases must stay float"
    conv_weights = [n.input[1] for n in convs]
    producers = {o: n for n in model.graph.node for o in n.output}
    for weight in conv_weights:
        dq = producers[weight]
        assert dq.op_type == "DequantizeLinear"
        scale = inits[dq.input[1]]
        assert scale.ndim == 1 and scale.size > 1, "conv weights are not per-channel"
        assert inits[dq.input[0]].dtype == np.int8


# x86 CPUs without VNNI (AVX2, AVX-512F/BW) run ONNX Runtime's INT8 Gemm/MatMul/Conv with
# VPMADDUBSW: unsigned 8-bit activations times signed 8-bit weights, two adjacent products
# summed into a saturating int16. The sum cannot saturate when 2 * 255 * |w| <= 32767.
U8_MAX, INT16_MAX = 255, 32767


def test_int8_weights_cannot_saturate_u8s8_pair_sums(tiny_onnx: Path, tmp_path: Path) -> None:
    model = onnx.load(str(_int8(tiny_onnx, tmp_path).path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weights = [
        inits[n.input[0]]
        for n in model.graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in inits
    ]
    assert weights, "no quantised weights"
    for weight in weights:
        largest = int(np.abs(weight.astype(np.int32)).max())
        assert 2 * U8_MAX * largest <= INT16_MAX, f"|w| reaches {largest}: pair sums saturate"


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile"])
def test_int8_accuracy_per_method(tiny_onnx: Path, tmp_path: Path, method: str) -> None:
    result = _int8(tiny_onnx, tmp_path, method)
    report = accuracy_report(tiny_onnx, result.path, _feeds(4, 3))
    assert report["outputs"]["logits"]["min_cosine"] > 0.98, report


def test_calibration_cache_is_reused(tiny_onnx: Path, tmp_path: Path) -> None:
    first = _int8(tiny_onnx, tmp_path)
    assert not first.cache_hit and first.cache_path.is_file() and first.samples == 8
    settings = CalibrationSettings(size=8)
    second = to_int8(tiny_onnx, tmp_path / "again.onnx", None, settings, first.cache_path)
    assert second.cache_hit
    a = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(first.path)).graph.initializer}
    b = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(second.path)).graph.initializer}
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_int8_without_data_or_cache_is_refused(tiny_onnx: Path, tmp_path: Path) -> None:
    settings = CalibrationSettings()
    with pytest.raises(ValueError, match="calibration"):
        to_int8(tiny_onnx, tmp_path / "x.onnx", None, settings, tmp_path / "none.json")


def test_feeds_reader_limits_and_filters() -> None:
    feeds = [{"image": np.zeros(1), "extra": np.ones(1)} for _ in range(5)]
    reader = FeedsReader(feeds, ["image"], limit=3)
    got = list(reader)
    assert len(got) == 3 and reader.count == 3 and all(set(f) == {"image"} for f in got)


def test_calibration_settings_validate() -> None:
    with pytest.raises(ValueError, match="method"):
        CalibrationSettings(method="kl")
    with pytest.raises(ValueError, match="size"):
        CalibrationSettings(size=0)


# -- the hook every family calls ----------------------------------------------------------


def _args(tmp_path: Path, precision: str, **extra: object) -> BuildOptions:
    values = {
        "precision": precision,
        "work_dir": tmp_path / "build",
        "output_repository": tmp_path / "repo",
        "threads": 1,
        "calibration": CalibrationSettings(size=6),
    }
    values.update(extra)
    return BuildOptions(**values)


def _config():
    return onnx_model_config(
        "tiny_model", [Tensor("image", "FP32", (3, 16, 16))], [Tensor("logits", "FP32", (10,))], 4
    )


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_serving_artifacts_lowers_and_reports(
    tiny_onnx: Path, tmp_path: Path, precision: str
) -> None:
    args = _args(tmp_path, precision)
    config, files = serving.serving_artifacts(
        "tiny_model", tiny_onnx, _config(), args, lambda: _feeds(10, 4)
    )
    assert config.platform == "onnxruntime_onnx"
    assert config.parameters["precision"].string_value == precision
    served = files["model.onnx"]
    assert served == tmp_path / "build" / "precision" / "tiny_model" / f"model.{precision}.onnx"
    report = files["accuracy.json"].read_text()
    assert '"held_out": true' in report and '"min_cosine"' in report
    if precision == "int8":
        assert list((tmp_path / "build" / "calibration" / "tiny_model").glob("*-minmax-n6.json"))


def test_serving_artifacts_fp32_serves_the_export(tiny_onnx: Path, tmp_path: Path) -> None:
    _, files = serving.serving_artifacts(
        "tiny_model", tiny_onnx, _config(), _args(tmp_path, "fp32")
    )
    assert files == {"model.onnx": tiny_onnx}
    assert not (tmp_path / "build").exists()


# -- metrics -----------------------------------------------------------------------------


def test_metrics_are_right_on_known_values() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(cosine_rows(a, a * 3), [1.0, 1.0])
    np.testing.assert_allclose(cosine_rows(a, a[::-1]), [0.0, 0.0], atol=1e-12)
    reference = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1]])
    candidate = np.array([[0.9, 0.1, 0.0], [0.8, 0.1, 0.1]])
    assert topk_agreement(reference, candidate, 1) == 0.5
    assert topk_agreement(reference, candidate, 2) == 1.0
    assert exact_match(["a b", "c"], ["a b", "d"]) == 0.5
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100.0)
    assert bleu(["a dog"], ["the cat sat on the mat"]) < 10


def test_calibration_cache_key_follows_the_data(tiny_onnx: Path, tmp_path: Path) -> None:
    args = _args(tmp_path, "int8")
    same = precision_step.calibration_cache(args, "tiny_model", tiny_onnx, lambda: _feeds(10, 4))
    again = precision_step.calibration_cache(args, "tiny_model", tiny_onnx, lambda: _feeds(10, 4))
    other = precision_step.calibration_cache(args, "tiny_model", tiny_onnx, lambda: _feeds(10, 5))
    assert same == again and same != other


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_histogram_calibration_accepts_feeds_of_different_shapes(
    tiny_onnx: Path, tmp_path: Path, method: str
) -> None:
    """BERT buckets and NMT cache lengths give feeds of several shapes in one source."""
    feeds = [f for batch in (1, 3, 2) for f in _feeds(3, batch, batch=batch)]
    settings = CalibrationSettings(method=method, size=9)
    result = to_int8(tiny_onnx, tmp_path / "m.onnx", lambda: feeds, settings, tmp_path / "c.json")
    assert result.samples == 9
    report = accuracy_report(tiny_onnx, result.path, _feeds(2, 8))
    assert report["outputs"]["logits"]["min_cosine"] > 0.95


def test_keep_float_nodes_get_no_qdq(tiny_onnx: Path, tmp_path: Path) -> None:
    settings = CalibrationSettings(size=4)
    cache = tmp_path / "c.json"
    result = to_int8(
        tiny_onnx, tmp_path / "m.onnx", lambda: _feeds(4, 2), settings, cache, [r"head"]
    )
    assert result.kept_float and all("head" in name for name in result.kept_float)
    model = onnx.load(str(result.path))
    producers = {o: n for n in model.graph.node for o in n.output}
    head = next(n for n in model.graph.node if n.name in result.kept_float)
    assert all(
        producers.get(i) is None or producers[i].op_type != "DequantizeLinear" for i in head.input
    ), "a kept-float node still reads dequantised INT8"


def test_family_defaults_and_overrides_for_keep_float(tmp_path: Path) -> None:
    bert = _args(tmp_path, "int8", family="bert")
    assert any("intermediate" in p for p in precision_step.keep_float(bert, "bert_model"))
    none = _args(tmp_path, "int8", family="bert", int8_keep_float=("none", "x"))
    assert precision_step.keep_float(none, "bert_model") == ("x",)
    assert (
        precision_step.keep_float(_args(tmp_path, "int8", family="resnet50"), "resnet50_model")
        == ()
    )
