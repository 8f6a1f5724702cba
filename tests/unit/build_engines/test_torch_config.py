"""TorchScript configs: Triton's own pytorch backend without shape re-specialisation, and
the CUDA-graph python model where graph buckets are asked for."""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.engines.torchscript import (
    TorchConfigOptions,
    torch_model_config,
    torch_model_files,
)
from triton_kit.build_engines.engines.torchscript.artifacts import torch_config
from triton_kit.build_engines.repository import Tensor

IO = ([Tensor("x", "FP32", (4,))], [Tensor("y", "FP32", (4,))])


def _parameters(config: mc.ModelConfig) -> dict[str, str]:
    return {k: v.string_value for k, v in config.parameters.items()}


def test_native_models_turn_the_profiling_executor_off() -> None:
    """With it on, every new batch size recompiled the graph: 23 img/s on an H200."""
    config = torch_model_config("m", *IO, TorchConfigOptions(max_batch_size=8, gpu=True))
    assert config.platform == "pytorch_libtorch"
    assert _parameters(config)["DISABLE_OPTIMIZED_EXECUTION"] == "true"
    onnx = mc.ModelConfig(name="m", platform="onnxruntime_onnx", max_batch_size=8)
    assert (
        _parameters(torch_config(onnx, gpu=False, precision="fp32"))["DISABLE_OPTIMIZED_EXECUTION"]
        == "true"
    )


def test_graph_buckets_make_a_python_model_with_its_shim(tmp_path: Path) -> None:
    options = TorchConfigOptions(max_batch_size=8, gpu=True, graph_batch_sizes=(1, 8))
    config = torch_model_config("m", *IO, options)
    assert (config.backend, config.platform) == ("python", "")
    assert config.optimization.cuda.graphs
    assert "DISABLE_OPTIMIZED_EXECUTION" not in _parameters(config)
    files = torch_model_files(tmp_path / "model.pt", options)
    assert "triton_kit.python_models.common.torchscript import TorchScriptModel" in str(
        files["model.py"]
    )
    cpu = TorchConfigOptions(max_batch_size=8, gpu=False, graph_batch_sizes=(1, 8))
    assert torch_model_config("m", *IO, cpu).platform == "pytorch_libtorch"
    assert set(torch_model_files(tmp_path / "model.pt", cpu)) == {"model.pt"}


def test_cuda_graphs_go_only_where_every_input_shape_is_fixed() -> None:
    """``--engine torch --cuda-graphs``: resnet50_model's fixed pixels get graph buckets;
    token ids of open length stay with Triton's own backend."""
    from triton_kit.build_engines.engines.torchscript.artifacts import _add_cuda_graphs

    image = mc.ModelConfig(name="r", platform="onnxruntime_onnx", max_batch_size=8)
    image.input.add(name="pixel_values", data_type=mc.TYPE_FP32, dims=[3, 224, 224])
    config = torch_config(image, gpu=True, precision="fp16")
    assert _add_cuda_graphs("r", config)
    assert (config.backend, config.platform, config.default_model_filename) == ("python", "", "")
    specs = config.optimization.cuda.graph_spec
    assert [s.batch_size for s in specs] == [1, 2, 4, 8]
    assert list(specs[0].input["pixel_values"].dim) == [3, 224, 224]
    assert "DISABLE_OPTIMIZED_EXECUTION" not in _parameters(config)

    text = mc.ModelConfig(name="b", platform="onnxruntime_onnx", max_batch_size=8)
    text.input.add(name="input_ids", data_type=mc.TYPE_INT64, dims=[-1])
    config = torch_config(text, gpu=True, precision="fp16")
    assert not _add_cuda_graphs("b", config)
    assert config.platform == "pytorch_libtorch"
    assert not config.optimization.cuda.graphs


def test_gpu_resnet_batching_is_what_won_on_the_h100() -> None:
    """Issue 30's tune on the H100 (tune_gpu.md), TorchScript: 2 GPU instances, no queue
    delay, preferred 64/128/256 (those the model allows); a queue policy already written
    stays."""
    from triton_kit.build_engines.engines.torchscript.config import apply_gpu_batching
    from triton_kit.build_engines.families.resnet50 import GPU_RESNET_BATCHING
    from triton_kit.build_engines.repository import enable_dynamic_batching

    config = torch_model_config("m", *IO, TorchConfigOptions(max_batch_size=128, gpu=True))
    enable_dynamic_batching(config, 0)
    config.dynamic_batching.default_queue_policy.max_queue_size = 7
    apply_gpu_batching(config, GPU_RESNET_BATCHING["pytorch_libtorch"])
    assert [(g.count, g.kind) for g in config.instance_group] == [
        (2, mc.ModelInstanceGroup.KIND_GPU)
    ]
    assert config.dynamic_batching.max_queue_delay_microseconds == 0
    assert list(config.dynamic_batching.preferred_batch_size) == [64, 128]
    assert config.dynamic_batching.default_queue_policy.max_queue_size == 7
