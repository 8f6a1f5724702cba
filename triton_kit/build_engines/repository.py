"""Write model_repository entries: config.pbtxt from Triton's own protobuf schema.

Building configs as ``ModelConfig`` messages (not string templates) means every
field name and enum is checked by the same schema Triton parses.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines import tuned
from triton_kit.build_engines.steps import info
from triton_kit.python_models.common.serving_policy import DEFAULT_QUEUE_POLICY, QueuePolicy

ModelConfig = mc.ModelConfig

_DTYPES = {
    "FP32": mc.TYPE_FP32,
    "FP16": mc.TYPE_FP16,
    "INT64": mc.TYPE_INT64,
    "INT32": mc.TYPE_INT32,
    "INT8": mc.TYPE_INT8,
    "UINT8": mc.TYPE_UINT8,
    "BOOL": mc.TYPE_BOOL,
    "STRING": mc.TYPE_STRING,
}


@dataclass(frozen=True)
class Tensor:
    """A model input or output as config.pbtxt declares it (dims exclude the batch axis)."""

    name: str
    dtype: str
    dims: tuple[int, ...]
    optional: bool = False


def add_inputs(config: mc.ModelConfig, tensors: Iterable[Tensor]) -> None:
    for t in tensors:
        config.input.add(
            name=t.name, data_type=_DTYPES[t.dtype], dims=list(t.dims), optional=t.optional
        )


def add_outputs(config: mc.ModelConfig, tensors: Iterable[Tensor]) -> None:
    for t in tensors:
        config.output.add(name=t.name, data_type=_DTYPES[t.dtype], dims=list(t.dims))


def set_parameters(config: mc.ModelConfig, parameters: Mapping[str, object]) -> None:
    for key, value in parameters.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        config.parameters[key].string_value = text


def set_instances(config: mc.ModelConfig, count: int, kind: str = "KIND_CPU") -> None:
    del config.instance_group[:]
    config.instance_group.add(count=count, kind=getattr(mc.ModelInstanceGroup, kind))


def enable_dynamic_batching(
    config: mc.ModelConfig,
    max_queue_delay_us: int,
    preferred: Iterable[int] = (),
    queue: QueuePolicy = DEFAULT_QUEUE_POLICY,
) -> None:
    config.dynamic_batching.max_queue_delay_microseconds = max_queue_delay_us
    config.dynamic_batching.preferred_batch_size.extend(preferred)
    apply_queue_policy(config, queue)


def apply_queue_policy(config: mc.ModelConfig, queue: QueuePolicy) -> None:
    """Bounded queue, default timeout that rejects, client deadlines honoured; an ``off``
    policy writes none (triton_kit/python_models/common/serving_policy.py says why that is the
    default)."""
    if queue.off:
        config.dynamic_batching.ClearField("default_queue_policy")
        return
    policy = config.dynamic_batching.default_queue_policy
    policy.timeout_action = mc.ModelQueuePolicy.REJECT
    policy.default_timeout_microseconds = queue.default_timeout_us
    policy.allow_timeout_override = queue.allow_timeout_override
    policy.max_queue_size = queue.max_queue_size


def onnx_model_config(
    name: str,
    inputs: Iterable[Tensor],
    outputs: Iterable[Tensor],
    max_batch_size: int,
    instances: int = 1,
    threads: int = 0,
    dynamic_batching_delay_us: int | None = None,
    preferred_batch_sizes: Iterable[int] = (),
    queue: QueuePolicy = DEFAULT_QUEUE_POLICY,
) -> mc.ModelConfig:
    """An ONNX model: the native backend in the container, the Python one here; ``queue``
    applies only with dynamic batching (``dynamic_batching_delay_us`` given)."""
    config = mc.ModelConfig(name=name, platform="onnxruntime_onnx", max_batch_size=max_batch_size)
    config.default_model_filename = "model.onnx"
    add_inputs(config, inputs)
    add_outputs(config, outputs)
    set_instances(config, instances)
    if threads:
        set_parameters(config, {"intra_op_thread_count": threads, "inter_op_thread_count": 1})
    if dynamic_batching_delay_us is not None:
        enable_dynamic_batching(config, dynamic_batching_delay_us, preferred_batch_sizes, queue)
    return config


def python_model_config(
    name: str,
    inputs: Iterable[Tensor],
    outputs: Iterable[Tensor],
    max_batch_size: int,
    parameters: Mapping[str, object] | None = None,
    instances: int = 1,
    dynamic_batching_delay_us: int | None = None,
    queue: QueuePolicy = DEFAULT_QUEUE_POLICY,
) -> mc.ModelConfig:
    config = mc.ModelConfig(name=name, backend="python", max_batch_size=max_batch_size)
    add_inputs(config, inputs)
    add_outputs(config, outputs)
    set_instances(config, instances)
    set_parameters(config, parameters or {})
    if dynamic_batching_delay_us is not None:
        enable_dynamic_batching(config, dynamic_batching_delay_us, queue=queue)
    return config


@dataclass(frozen=True)
class Step:
    """One model of an ensemble, with ensemble tensor names mapped to its own."""

    model: str
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]


def ensemble_config(
    name: str,
    inputs: Iterable[Tensor],
    outputs: Iterable[Tensor],
    max_batch_size: int,
    steps: Iterable[Step],
) -> mc.ModelConfig:
    """``input_map``/``output_map`` map the step model's tensor name to the ensemble's."""
    config = mc.ModelConfig(name=name, platform="ensemble", max_batch_size=max_batch_size)
    add_inputs(config, inputs)
    add_outputs(config, outputs)
    for step in steps:
        entry = config.ensemble_scheduling.step.add(model_name=step.model, model_version=-1)
        entry.input_map.update(dict(step.input_map))
        entry.output_map.update(dict(step.output_map))
    return config


def render(config: mc.ModelConfig) -> str:
    return text_format.MessageToString(config)


def parse(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


def write_model(
    repository: Path, config: mc.ModelConfig, files: Mapping[str, Path | bytes | str] | None = None
) -> Path:
    """Replace ``repository/<name>`` with config.pbtxt and version-1 files; fields that
    ``python -m triton_kit.loadtest tune --apply`` recorded there (tuned.json) are kept."""
    model_dir = Path(repository) / config.name
    kept = tuned.read(model_dir)
    if model_dir.exists():
        shutil.rmtree(model_dir)
    version_dir = model_dir / "1"
    version_dir.mkdir(parents=True)
    if kept is not None:
        config = kept.apply(config)
        tuned.write(model_dir, kept)
        info(f"{config.name}: kept tuned {', '.join(kept.paths)} ({tuned.TUNED_FILE})")
    (model_dir / "config.pbtxt").write_text(render(config))
    for filename, content in (files or {}).items():
        target = version_dir / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    if config.platform == "ensemble":
        (version_dir / ".keep").write_text("")  # Triton needs the version folder to exist.
    return model_dir


def python_shim(import_path: str) -> str:
    """The one-line model.py that points Triton at the shared implementation."""
    module, _, cls = import_path.rpartition(".")
    return (
        f'"""Generated by triton_kit.build_engines; the implementation lives in {module}."""\n\n'
        f"from {module} import {cls} as TritonPythonModel  # noqa: F401\n"
    )


def describe_path(path: Path | str) -> str:
    """A path for a served config: its last two parts, never the build machine's layout."""
    return "/".join(Path(path).parts[-2:])


def numpy_dtype_name(dtype: np.dtype) -> str:
    """Config dtype for a numpy dtype ("FP32", ...)."""
    return {
        np.dtype(np.float32): "FP32",
        np.dtype(np.float16): "FP16",
        np.dtype(np.int64): "INT64",
        np.dtype(np.int32): "INT32",
    }[np.dtype(dtype)]
