"""``--precision int8-dynamic``: ONNX Runtime's dynamic quantisation of the nmt graphs.

The default number model goes through the real build with the option; the served files
must hold integer MatMuls, and the served search (in process and through Triton) must keep
the exact match against num2words references.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.options import BuildOptions

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def test_int8_dynamic_is_an_onnxruntime_and_torch_precision() -> None:
    """ONNX Runtime's quantize_dynamic, or PyTorch's for the nmt TorchScript searches
    (tests/build/build_engines/test_nmt_*torch_generate.py); TensorRT runs neither."""
    assert BuildOptions(precision="int8-dynamic").precision == "int8-dynamic"
    assert BuildOptions(precision="int8-dynamic", engine=Engine.TORCH).engine is Engine.TORCH
    with pytest.raises(ValueError, match="int8-dynamic"):
        BuildOptions(precision="int8-dynamic", engine=Engine.TENSORRT)


def test_torch_int8_dynamic_is_refused_for_the_step_models(tmp_path) -> None:
    """The torch engine's step models (here BERT's) have no int8-dynamic build."""
    from triton_kit.build_engines.cli import build_from_argv
    from triton_kit.build_engines.steps import BuildError

    argv = ["bert", "--engine", "torch", "--precision", "int8-dynamic", "--dry-run"]
    argv += ["--output-repository", str(tmp_path / "repo"), "--work-dir", str(tmp_path / "w")]
    with pytest.raises(BuildError, match="search alone has int8-dynamic"):
        build_from_argv(argv)


def test_flag_is_offered_with_an_honest_help() -> None:
    import argparse

    from triton_kit.build_engines.flags import add_common_arguments, build_options

    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    assert "int8-dynamic" in parser.format_help()
    args = parser.parse_args(["--precision", "int8-dynamic"])
    assert build_options(args, "nmt").precision == "int8-dynamic"


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    from triton_kit.build_engines.cli import build_from_argv

    tmp = tmp_path_factory.mktemp("nmt_int8_dynamic")
    argv = ["nmt", "--engine", "onnxruntime", "--precision", "int8-dynamic"]
    argv += ["--verify-sentences", "4"]
    argv += ["--output-repository", str(tmp / "repo"), "--work-dir", str(tmp / "work")]
    argv += ["--instances", "1", "--threads", "2"]
    build_from_argv(argv)
    return tmp / "repo"


def _op_types(path: Path) -> set[str]:
    return {node.op_type for node in onnx.load(str(path)).graph.node}


def test_served_graphs_hold_integer_matmuls(repository: Path) -> None:
    for name in ("nmt_encoder", "nmt_decoder"):
        ops = _op_types(repository / name / "1" / "model.onnx")
        assert "DynamicQuantizeLinear" in ops or "DynamicQuantizeMatMul" in ops, name
        assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops, name
        config = (repository / name / "config.pbtxt").read_text()
        assert "int8-dynamic" in config
        assert (repository / name / "1" / "accuracy.json").exists()


def _held_out() -> tuple[list[str], list[str]]:
    numbers = list(corpus.Split.load(DEFAULT_CHECKPOINT / "split.json").test)
    return [corpus.english(n) for n in numbers], [corpus.french(n) for n in numbers]


@pytest.mark.slow
def test_served_int8_keeps_exact_match(repository: Path) -> None:
    from transformers import MarianMTModel

    from tests.support.nmt_reference import InProcess
    from triton_kit.client import TritonClient
    from triton_kit.server import ServerConfig, TritonServer

    texts, references = _held_out()
    model = MarianMTModel.from_pretrained(str(DEFAULT_CHECKPOINT))
    local = InProcess(
        model,
        repository / "nmt" / "1",
        repository / "nmt_encoder" / "1" / "model.onnx",
        repository / "nmt_decoder" / "1" / "model.onnx",
    ).translate(texts, beam=4, max_length=64)
    config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
    with TritonServer(config) as server, TritonClient(server.grpc_url) as triton:
        served = triton.translate(texts, beam_size=4)
    exact = np.mean([a == b for a, b in zip(served, references, strict=True)])
    assert len(texts) == 500
    assert served == local
    assert exact >= 0.99
