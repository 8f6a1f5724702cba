"""The build's options: parsed ONCE from the command line into frozen, typed values.

Every default is written here (and in the precision/TensorRT option dataclasses this holds);
the command-line flags (:mod:`triton_kit.build_engines.flags`) take their defaults from these,
and the rebuild command written into sidecars lists exactly the values that differ from them.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from triton_kit.build_engines.engines.aoti.options import AotiOptions
from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.engines.tensorrt.options import TensorRTOptions
from triton_kit.build_engines.precision.int8 import CalibrationSettings
from triton_kit.python_models.common.contracts import family_of
from triton_kit.python_models.common.serving_policy import (
    BOUNDED_QUEUE_POLICY,
    DEFAULT_QUEUE_POLICY,
    QueuePolicy,
)

PRECISIONS = ("fp32", "fp16", "int8", "int8-dynamic")
# Dynamic quantisation (integer ops, no Q/DQ): ONNX Runtime's for its engine, PyTorch's for
# the nmt TorchScript searches (--engine torch --search engine); TensorRT runs neither.
DYNAMIC_INT8 = ("int8-dynamic",)
DYNAMIC_INT8_ENGINES = (Engine.ONNXRUNTIME, Engine.TORCH)
# --queue-policy: the queue every dynamically batched model gets
# (triton_kit/python_models/common/serving_policy).
QUEUE_POLICIES = {"off": DEFAULT_QUEUE_POLICY, "bounded": BOUNDED_QUEUE_POLICY}
QUEUE_NUMBERS_NEED_BOUNDED = (
    "--max-queue-size and --queue-timeout-ms need --queue-policy bounded "
    "(the default, off, writes no queue policy)"
)


@dataclass(frozen=True)
class BuildOptions:
    """What every family's build and the precision/engine hook take (never the Namespace)."""

    family: str | None = None  # None (or "all"): from the model name
    precision: str = "fp32"
    engine: Engine = Engine.ONNXRUNTIME
    dry_run: bool = False
    output_repository: Path = Path("model_repository")
    work_dir: Path = Path("build")
    max_batch_size: int | None = None  # None: the family's
    instances: int | None = None  # None: the family's (see cli.DEFAULT_INSTANCES)
    threads: int | None = None  # None: the cores split between the instances
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    int8_keep_float: tuple[str, ...] = ()  # as given; "none" drops the family's patterns
    tensorrt: TensorRTOptions = field(default_factory=TensorRTOptions)
    aoti: AotiOptions = field(default_factory=AotiOptions)  # --engine aoti
    shape_ranges: tuple[str, ...] = ()  # --shape-range AXIS=MIN:OPT:MAX[,...]
    queue: QueuePolicy = DEFAULT_QUEUE_POLICY  # of every dynamically batched model

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r} is not one of {PRECISIONS}")
        object.__setattr__(self, "engine", Engine(self.engine))
        if self.precision in DYNAMIC_INT8 and self.engine not in DYNAMIC_INT8_ENGINES:
            raise ValueError(
                f"precision {self.precision} is ONNX Runtime's dynamic quantisation "
                "(--engine onnxruntime) or PyTorch's for the nmt TorchScript searches "
                "(--engine torch --search engine); TensorRT takes --precision int8, Q/DQ"
            )
        object.__setattr__(self, "output_repository", Path(self.output_repository))
        object.__setattr__(self, "work_dir", Path(self.work_dir))
        if self.tensorrt.timing_cache is None:  # the one place the cache's default is derived
            cache = self.work_dir / "tensorrt" / "timing.cache"
            object.__setattr__(self, "tensorrt", replace(self.tensorrt, timing_cache=cache))

    def family_of(self, name: str) -> str:
        return self.family if self.family and self.family != "all" else family_of(name)

    def with_family_defaults(self, instances: int, cpu_count: int) -> BuildOptions:
        """Fill instances/threads left out: the cores are split between the instances."""
        instances = self.instances or instances
        threads = self.threads or max(1, cpu_count // instances)
        return replace(self, instances=instances, threads=threads)


def queue_policy(
    name: str, max_queue_size: int | None = None, timeout_ms: int | None = None
) -> QueuePolicy:
    """``--queue-policy NAME`` with ``--max-queue-size``/``--queue-timeout-ms`` overriding the
    bounded values; ValueError if the numbers come without ``bounded`` or are negative."""
    policy = QUEUE_POLICIES[name]
    given = {"max_queue_size": max_queue_size, "default_timeout_us": timeout_ms}
    given = {key: value for key, value in given.items() if value is not None}
    if given and policy.off:
        raise ValueError(QUEUE_NUMBERS_NEED_BOUNDED)
    if any(value < 0 for value in given.values()):
        raise ValueError("--max-queue-size and --queue-timeout-ms must be >= 0")
    if "default_timeout_us" in given:
        given["default_timeout_us"] *= 1000
    return replace(policy, **given)


def queue_policy_name(policy: QueuePolicy) -> str:
    return "off" if policy.off else "bounded"


def queue_flags(policy: QueuePolicy) -> list[str]:
    """The flags that give ``policy`` (none for the default)."""
    if policy == BuildOptions.queue:
        return []
    parts = ["--queue-policy", queue_policy_name(policy)]
    if not policy.off:
        parts += ["--max-queue-size", str(policy.max_queue_size)]
        parts += ["--queue-timeout-ms", str(policy.default_timeout_us // 1000)]
    return parts


def rebuild_command(options: BuildOptions, name: str) -> str:
    """The ``python -m triton_kit.build_engines`` line that rebuilds this plan (for sidecars and
    errors): the options that differ from the dataclass defaults, the only place defaults
    live."""
    parts = [
        "python",
        "-m",
        "triton_kit.build_engines",
        options.family_of(name),
        "--engine",
        "tensorrt",
    ]
    parts += ["--precision", options.precision]
    parts += _changed(options.tensorrt, TensorRTOptions(), "", skip=("timing_cache",))
    if options.precision == "int8":
        parts += _changed(options.calibration, CalibrationSettings(), "calibration_")
    for item in options.shape_ranges:
        parts += ["--shape-range", item]
    parts += queue_flags(options.queue)
    if options.output_repository != BuildOptions.output_repository:
        parts += ["--output-repository", str(options.output_repository)]
    return shlex.join(parts)


def _changed(value: object, default: object, prefix: str, skip: tuple = ()) -> list[str]:
    parts: list[str] = []
    defaults = asdict(default)
    for item in fields(value):
        given, was = getattr(value, item.name), defaults[item.name]
        if item.name in skip or given == was:
            continue
        flag = "--" + (prefix + item.name).replace("_", "-")
        parts += [flag] if isinstance(was, bool) else [flag, str(given)]
    return parts
