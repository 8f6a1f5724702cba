"""Optimisation profiles derived from the ONNX graph's dynamic axes plus a small shape spec.

Each dynamic axis of each input gets a [min, opt, max] range: axis 0 is the
batch when the config batches (1 .. max_batch_size); every other dynamic axis
is looked up by its symbolic name (or ``input.axis`` where it has none) in the
family's shape ranges. A dimension with several ranges (BERT's sequence
buckets) gives one profile per range. Per-family knowledge is only the
``SHAPE_RANGES`` table below (ranges read from the family's config);
``--shape-range`` overrides it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Dim = int | str  # a fixed size, or the name of a dynamic axis


@dataclass(frozen=True)
class DimRange:
    min: int
    opt: int
    max: int

    def __post_init__(self) -> None:
        if not 0 <= self.min <= self.opt <= self.max or self.max < 1:
            raise ValueError(f"need 0 <= min <= opt <= max and max >= 1, got {self}")

    @classmethod
    def parse(cls, text: str) -> DimRange:
        """``"1:8:16"`` (min:opt:max) or ``"16"`` (fixed)."""
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            parts *= 3
        if len(parts) != 3:
            raise ValueError(f"shape range {text!r} is not MIN:OPT:MAX")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.min}:{self.opt}:{self.max}"


@dataclass(frozen=True)
class InputSpec:
    """A network input as ONNX declares it (dims include the batch axis)."""

    name: str
    dims: tuple[Dim, ...]


@dataclass(frozen=True)
class ShapeRange:
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


@dataclass(frozen=True)
class Profile:
    """One TensorRT optimisation profile: input name -> min/opt/max shapes."""

    shapes: tuple[tuple[str, ShapeRange], ...]

    def as_dict(self) -> dict[str, ShapeRange]:
        return dict(self.shapes)

    def as_record(self) -> dict[str, dict[str, list[int]]]:
        return {
            name: {"min": list(r.min), "opt": list(r.opt), "max": list(r.max)}
            for name, r in self.shapes
        }


class ProfileError(ValueError):
    """A dynamic axis has no range; the message says how to give one."""


RangeTable = dict[str, tuple[DimRange, ...]]


def _string_parameter(config, key: str) -> str | None:
    return config.parameters[key].string_value if key in config.parameters else None


def bert_ranges(config) -> RangeTable:
    """One profile per sequence bucket (the tokenizer pads to exactly these lengths)."""
    buckets = _string_parameter(config, "buckets") or "16,32,64,128,256,512"
    lengths = sorted(int(b) for b in buckets.split(","))
    ranges, low = [], 1
    for length in lengths:
        ranges.append(DimRange(low, length, length))
        low = length + 1
    return {"sequence": tuple(ranges)}


def _int_parameter(config, keys: Sequence[str], default: int) -> int:
    for key in keys:
        value = _string_parameter(config, key)
        if value:
            return int(value)
    return default


def nmt_ranges(config) -> RangeTable:
    """Encoder: batch x source length. Decoder step (no Triton batching: the KV cache has its
    rows on axis 2): rows = batch x beams (``past_rows``, the previous step's, alike: the
    step gathers them by ``beam_index``), source length, and the self-attention cache
    (``past_len``) from 0 (first step) up to the longest output."""
    source = _int_parameter(config, ("max_source_length", "max_source_tokens"), 64)
    target = _int_parameter(config, ("max_target_length", "max_length", "max_new_tokens"), 64)
    batch = config.max_batch_size or _int_parameter(config, ("max_batch", "max_batch_size"), 8)
    beams = _int_parameter(config, ("max_beam_size", "num_beams", "max_beams"), 4)
    return {
        "batch": (DimRange(1, batch, batch),),
        "rows": (DimRange(1, batch, batch * beams),),
        "past_rows": (DimRange(1, batch, batch * beams),),
        "src_len": (DimRange(1, min(16, source), source),),
        "past_len": (DimRange(0, min(16, target), target),),
    }


# The only per-family knowledge: ranges of non-batch dynamic axes, keyed by the axis' symbolic
# name, derived from the family's config. Several ranges for one axis make several profiles.
SHAPE_RANGES: dict[str, Callable[..., RangeTable]] = {
    "resnet50": lambda config: {},
    "bert": bert_ranges,
    "nmt": nmt_ranges,
}


def parse_shape_ranges(items: Iterable[str]) -> RangeTable:
    """``["sequence=1:64:128,129:256:512"]`` -> {"sequence": (DimRange..., DimRange...)}."""
    ranges: RangeTable = {}
    for item in items:
        name, sep, spec = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--shape-range {item!r} is not NAME=MIN:OPT:MAX[,MIN:OPT:MAX...]")
        ranges[name.strip()] = tuple(DimRange.parse(p) for p in spec.split(","))
    return ranges


def ranges_for(family: str, config, overrides: Mapping[str, Sequence[DimRange]] | None = None):
    """The family's ranges for this config, with command-line overrides on top."""
    provider = SHAPE_RANGES.get(family)
    ranges = dict(provider(config)) if provider else {}
    ranges.update({k: tuple(v) for k, v in (overrides or {}).items()})
    return ranges


def onnx_inputs(path: Path) -> list[InputSpec]:
    """The graph inputs of an ONNX file (not initialisers), with symbolic names for dynamic axes."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims: list[Dim] = []
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                dims.append(int(dim.dim_value))
            else:
                dims.append(dim.dim_param or f"{value.name}.{axis}")
        specs.append(InputSpec(value.name, tuple(dims)))
    return specs


def config_inputs(config, dynamic_axes=None) -> list[InputSpec]:
    """Inputs from a Triton config where no ONNX exists yet (dry runs): -1 axes get the
    export's names (``dynamic_axes``: input -> {axis: name}), else ``input.axis``; the batch
    axis is prepended when the config batches."""
    specs = []
    for tensor in config.input:
        offset = 1 if config.max_batch_size > 0 else 0
        dims: list[Dim] = ["batch"] if offset else []
        names = (dynamic_axes or {}).get(tensor.name, {})
        for axis, size in enumerate(tensor.dims):
            default = f"{tensor.name}.{axis + offset}"
            dims.append(int(size) if size > 0 else names.get(axis + offset, default))
        specs.append(InputSpec(tensor.name, tuple(dims)))
    return specs


def derive_profiles(
    inputs: Sequence[InputSpec],
    max_batch_size: int,
    ranges: Mapping[str, Sequence[DimRange]],
) -> list[Profile]:
    """One profile per combination of the multi-range axes (usually one, or one per bucket)."""
    axes = _dynamic_axes(inputs, max_batch_size, ranges)
    names = sorted(axes)
    profiles = []
    for choice in itertools.product(*(axes[name] for name in names)):
        picked = dict(zip(names, choice, strict=True))
        profiles.append(
            Profile(tuple((spec.name, _shape_range(spec.dims, picked)) for spec in inputs))
        )
    return profiles


def _dynamic_axes(
    inputs: Sequence[InputSpec], max_batch_size: int, ranges: Mapping[str, Sequence[DimRange]]
) -> dict[str, tuple[DimRange, ...]]:
    axes: dict[str, tuple[DimRange, ...]] = {}
    missing: list[str] = []
    for spec in inputs:
        for axis, dim in enumerate(spec.dims):
            if isinstance(dim, int) or dim in axes:
                continue
            if axis == 0 and max_batch_size > 0:
                axes[dim] = (DimRange(1, max_batch_size, max_batch_size),)
            elif dim in ranges:
                axes[dim] = tuple(ranges[dim])
            else:
                missing.append(f"'{dim}' (axis {axis} of input '{spec.name}')")
    if missing:
        raise ProfileError(
            f"no shape range for dynamic axes {', '.join(missing)}; pass "
            "--shape-range NAME=MIN:OPT:MAX (several comma-separated ranges make several profiles)"
            " or add them to build_engines.engines.tensorrt.profiles.SHAPE_RANGES"
        )
    return axes


def static_profiles(profiles: Sequence[Profile]) -> list[Profile]:
    """Each profile fixed at its opt shape (min = opt = max): DLA runs static shapes only."""
    return [
        Profile(tuple((name, ShapeRange(r.opt, r.opt, r.opt)) for name, r in profile.shapes))
        for profile in profiles
    ]


def _shape_range(dims: tuple[Dim, ...], picked: Mapping[str, DimRange]) -> ShapeRange:
    def pick(attr: str) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else getattr(picked[d], attr) for d in dims)

    return ShapeRange(pick("min"), pick("opt"), pick("max"))
