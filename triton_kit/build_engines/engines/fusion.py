"""ONNX Runtime's transformer fusions as a build step: FP32 ONNX -> fused FP32 ONNX, checked.

``onnxruntime.transformers.optimizer.optimize_model`` rewrites a transformer's subgraphs into
ONNX Runtime's contrib ops (one ``Attention`` per layer instead of ~40 MatMul/Reshape/
Transpose/Softmax nodes; ``SkipLayerNormalization``, ``EmbedLayerNormalization``,
``BiasGelu``). ONNX Runtime's own session optimiser, which the served sessions run at
ORT_ENABLE_ALL, fuses only the GELU and LayerNorm parts of our BERT export, no attention.

Only the Python fusions run (``opt_level`` 0): an ONNX Runtime pass (level >= 1) saves the
graph with that runtime's own opset imports, and level 2 may emit ops for one execution
provider. The fused graph keeps ONNX Runtime's contrib ops that have CPU and CUDA kernels in
every release since well before the 24.10 container's 1.19 (:data:`PORTABLE_OPS`); any
other contrib op fails the build. TensorRT cannot parse contrib ops, and the FP16/INT8 steps
do not handle them (:func:`skip_reason`), so the fusion runs for FP32 with ONNX Runtime only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.build_engines.engines.registry import Engine

OPT_LEVEL = 0  # Python fusions only: no ONNX Runtime pass, portable to the container's 1.19
CONTRIB_DOMAIN = "com.microsoft"
# Contrib ops with CPU and CUDA kernels in ONNX Runtime 1.19 (the 24.10 container) and here.
PORTABLE_OPS = frozenset(
    {
        "Attention",
        "BiasGelu",
        "EmbedLayerNormalization",
        "FastGelu",
        "Gelu",
        "SkipLayerNormalization",
    }
)
# Max abs diff fused vs unfused on FP32 embeddings: a correct fusion differs by ~1e-7
# (float reassociation); a lost attention mask or a wrong head split differs by > 1e-2.
TOLERANCE = 1e-4
WHY_FP32_ONLY = {
    "fp16": "the FP16 converter cannot type the fused SkipLayerNormalization, and ONNX Runtime's "
    "CPU Attention is FP32 only, so the build could not check it",
    "int8": "Q/DQ calibration would leave each fused Attention's projections in float, and "
    "TensorRT cannot parse contrib ops",
    "int8-dynamic": "dynamic quantisation cannot infer the types of the contrib ops' outputs",
}


@dataclass(frozen=True)
class Fused:
    """The fused graph, its contrib-op counts and its distance from the unfused graph."""

    path: Path
    counts: Mapping[str, int]
    max_abs_diff: float


def skip_reason(enabled: bool, precision: str, engine: Engine) -> str | None:
    """Why the fusion does not run for these options (None: it runs)."""
    if not enabled:
        return "turned off (--no-fusion)"
    if engine is not Engine.ONNXRUNTIME:
        return f"--engine {engine.value} serves no ONNX Runtime graph (fusion is for onnxruntime)"
    if precision != "fp32":
        return f"fp32 only, not {precision}: {WHY_FP32_ONLY.get(precision, 'not checked')}"
    return None


def contrib_op_counts(model) -> dict[str, int]:
    """How many nodes of each ONNX Runtime contrib op ``model`` (an onnx.ModelProto) has."""
    counts = Counter(n.op_type for n in model.graph.node if n.domain == CONTRIB_DOMAIN)
    return dict(sorted(counts.items()))


def describe(counts: Mapping[str, int]) -> str:
    """``Attention 6, BiasGelu 6`` (``none`` when nothing was fused)."""
    return ", ".join(f"{op} {count}" for op, count in counts.items()) or "none"


def check_portable(counts: Mapping[str, int]) -> None:
    """Refuse contrib ops the container's ONNX Runtime (CPU or CUDA) may not have."""
    others = sorted(set(counts) - PORTABLE_OPS)
    if others:
        raise ValueError(
            f"the fused graph has contrib ops {others} outside the portable set "
            f"{sorted(PORTABLE_OPS)}: rebuild with --no-fusion"
        )


def check_close(diff: float, tolerance: float = TOLERANCE) -> None:
    if not diff <= tolerance:  # NaN fails too
        raise ValueError(f"fused graph differs from the unfused one by {diff:.3g} > {tolerance:g}")


def fuse(
    source: Path, target: Path, model_type: str, num_heads: int, hidden_size: int
) -> dict[str, int]:
    """Write ``source`` with ONNX Runtime's transformer fusions to ``target``; the op counts."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(source),
        model_type=model_type,
        num_heads=num_heads,
        hidden_size=hidden_size,
        opt_level=OPT_LEVEL,
        use_gpu=False,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    optimized.save_model_to_file(str(target))
    return contrib_op_counts(optimized.model)


def max_abs_diff(
    reference: Path, candidate: Path, feeds: Mapping[str, np.ndarray], threads: int = 0
) -> float:
    """Largest |difference| over every output, both graphs run with the served options."""
    from triton_kit.python_models.common.ort_session import create_session, threaded

    settings = threaded(threads)
    expected = create_session(reference, settings).run(None, dict(feeds))
    actual = create_session(candidate, settings).run(None, dict(feeds))
    return max(float(np.max(np.abs(a - e))) for a, e in zip(actual, expected, strict=True))


def fuse_and_check(
    source: Path,
    target: Path,
    model_type: str,
    num_heads: int,
    hidden_size: int,
    feeds: Mapping[str, np.ndarray],
    threads: int = 0,
) -> Fused:
    """Fuse, refuse non-portable ops, and fail unless the fused graph matches the unfused."""
    counts = fuse(source, target, model_type, num_heads, hidden_size)
    check_portable(counts)
    diff = max_abs_diff(source, target, feeds, threads)
    check_close(diff)
    return Fused(target, counts, diff)


def parameters(fused: Fused | None, reason: str | None) -> dict[str, str]:
    """What the config parameters and build.json record about the fusion."""
    if fused is None:
        return {"fusion": f"off: {reason}"}
    return {
        "fusion": f"onnxruntime.transformers opt_level {OPT_LEVEL}: {describe(fused.counts)}",
        "fused_vs_unfused_max_abs_diff": f"{fused.max_abs_diff:.3g}",
    }
