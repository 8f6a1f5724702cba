"""The models triton_kit/benchmarks/gpu/run.py measures (RANDOM weights: speed only), and their
TorchScript.

``tiny`` gives the same code paths with small shapes, for the CPU smoke run
(``python -m triton_kit.benchmarks.gpu --smoke``) that catches typos before the lent GPU does.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.settings import Settings


@dataclass(frozen=True)
class Spec:
    """One model to measure: how to build it and what one request looks like."""

    name: str
    inputs: dict[str, tuple[str, tuple[int, ...]]]  # name -> (Triton dtype, inner dims)
    output: tuple[str, int]
    buckets: tuple[int, ...]
    instances: int


def _resnet(tiny: bool):
    from transformers import ResNetConfig, ResNetForImageClassification

    if tiny:
        config = ResNetConfig(
            num_labels=1000, embedding_size=8, hidden_sizes=[8, 16, 16, 32], depths=[1, 1, 1, 1]
        )
    else:
        config = ResNetConfig(num_labels=1000)  # the defaults are ResNet-50's
    return ResNetForImageClassification(config).eval()


class _Normalised:
    """Mixin-free helper: ImageNet mean/std as buffers scaled to 0..255 inputs."""

    @staticmethod
    def buffers(module) -> None:
        import torch

        mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
        module.register_buffer("mean", mean)
        module.register_buffer("std", std)


def resnet50_uint8(settings: Settings):
    """ResNet-50 taking UINT8 NHWC 224x224 images; normalisation inside (FP16 on the GPU)."""
    import torch

    half = settings.half

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = _resnet(settings.smoke)
            _Normalised.buffers(self)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = (image.permute(0, 3, 1, 2).float() - self.mean) / self.std
            x = x.half() if half else x
            return self.model(pixel_values=x).logits.float()

    net = Net().eval()
    if half:
        net.model.half()
    return net


def resnet50_pixels(settings: Settings):
    """ResNet-50 on pre-processed FP32 [3, 224, 224] pixels: behind the JPEG/UINT8 ensembles."""
    import torch

    half = settings.half

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = _resnet(settings.smoke)

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            x = pixel_values.half() if half else pixel_values
            return self.model(pixel_values=x).logits.float()

    net = Net().eval()
    if half:
        net.model.half()
    return net


def bert(settings: Settings, layers: int, hidden: int, heads: int):
    """BERT encoder, mean-pooled (FP16 on the GPU), random weights."""
    import torch
    from transformers import BertConfig, BertModel

    if settings.smoke:
        layers, hidden, heads = 1, 64, 2
    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        attn_implementation="sdpa",
    )
    half = settings.half

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = BertModel(config, add_pooling_layer=False).eval()
            if half:
                self.model.half()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden_states = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)
            return ((hidden_states * mask).sum(1) / mask.sum(1)).float()

    return Net().eval()


def example(spec: Spec, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    arrays = {}
    for name, (dtype, dims) in spec.inputs.items():
        if dtype == "UINT8":
            arrays[name] = rng.integers(0, 256, (batch, *dims), dtype=np.uint8)
        elif dtype == "FP32":
            arrays[name] = rng.standard_normal((batch, *dims), dtype=np.float32)
        elif name == "attention_mask":
            arrays[name] = np.ones((batch, *dims), dtype=np.int64)
        else:
            arrays[name] = rng.integers(1000, 2000, (batch, *dims), dtype=np.int64)
    return arrays


def native_name(spec: Spec, instances: int) -> str:
    return f"{spec.name}_native{instances}"


def write_torch_model(
    repo: Path,
    spec: Spec,
    module,
    max_batch: int,
    settings: Settings,
    output_dims: int,
    native_instances: tuple[int, ...] = (),
) -> None:
    """The TorchScript as ``spec.name`` (CUDA graphs per bucket on the GPU: the python
    TorchScriptModel) and as ``<name>_native<N>`` for each N of ``native_instances``
    (Triton's own pytorch backend, N instances, no graphs)."""
    import torch

    from triton_kit.build_engines.engines.torchscript import (
        TorchConfigOptions,
        torch_model_config,
        torch_model_files,
    )
    from triton_kit.build_engines.repository import Tensor, write_model

    rng = np.random.default_rng(0)
    ex = tuple(torch.from_numpy(a).to(settings.device) for a in example(spec, 2, rng).values())
    with torch.no_grad():
        traced = torch.jit.trace(module, ex, check_trace=False)
    model_pt = Path(tempfile.mkdtemp(prefix="gpu-bench-pt-")) / "model.pt"
    traced.save(str(model_pt))
    options = TorchConfigOptions(
        max_batch_size=max_batch,
        gpu=settings.gpu,
        instances=spec.instances,
        precision="fp16" if settings.half else "fp32",
        queue_delay_us=100,
        graph_batch_sizes=spec.buckets if settings.gpu else (),
        graph_dims={n: d for n, (_, d) in spec.inputs.items()},
    )
    inputs = [Tensor(n, t, d) for n, (t, d) in spec.inputs.items()]
    outputs = [Tensor(spec.output[0], "FP32", (output_dims,))]
    variants = [(spec.name, options)] + [
        (native_name(spec, n), replace(options, instances=n, graph_batch_sizes=()))
        for n in native_instances
    ]
    for name, variant in variants:
        config = torch_model_config(name, inputs, outputs, variant)
        write_model(repo, config, torch_model_files(model_pt, variant))
