"""Where a decoder step's time goes inside ONNX Runtime: kernels per step and their kinds.

The served search calls the decoder once per generated token, so at small batches a step's
cost is the executor's per-kernel overhead, not arithmetic. This runs the served
``nmt_decoder`` file with the served session options on a steady-state step (the cache
``past`` tokens long) and reads ONNX Runtime's own profiler: kernels per step, the share of
kernel time in shape bookkeeping (the ops that only move, slice or describe tensors) and in
matrix products, beside the unprofiled step time.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Ops that compute no arithmetic on the activations: shapes, views, copies, index plumbing.
BOOKKEEPING = frozenset(
    {
        "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Reshape", "Transpose",
        "Slice", "Cast", "Split", "Expand", "Range", "ConstantOfShape", "Identity",
        "Equal", "Where", "Less", "Not", "And",
    }
)  # fmt: skip
MATRIX = frozenset({"MatMul", "FusedMatMul", "Gemm", "MatMulInteger", "DynamicQuantizeMatMul"})
TIMED_STEPS = 300
PROFILED_STEPS = 100


@dataclass(frozen=True)
class StepProfile:
    """One decoder file at one batch width."""

    label: str
    rows: int
    step_ms: float  # unprofiled, mean over TIMED_STEPS
    kernels: int  # per step
    bookkeeping_kernels: int
    bookkeeping_share: float  # of kernel time
    matrix_share: float


def _session(path: Path, threads: int, profile: bool):
    from triton_kit.python_models.common.ort_session import (
        create_session,
        session_options,
        threaded,
    )

    if not profile:
        return create_session(path, threaded(threads))
    import onnxruntime as ort

    options = session_options(threaded(threads))
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="nmt-prof-"), "decoder")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _feed(session, rows: int, source: int, past: int) -> dict[str, np.ndarray]:
    """Zero ids, full masks and random caches shaped as the graph's inputs declare."""
    rng = np.random.default_rng(0)
    sizes = {"source": source, "past": past}
    feed = {}
    for meta in session.get_inputs():
        shape = meta.shape
        if meta.name == "input_ids":
            feed[meta.name] = np.full((rows, 1), 7, dtype=np.int64)
        elif meta.name == "encoder_attention_mask":
            feed[meta.name] = np.ones((rows, source), dtype=np.int64)
        elif meta.name == "beam_index":
            feed[meta.name] = np.arange(rows, dtype=np.int64)
        else:  # cross_kv / past_kv: [layers, 2, rows, heads, length, head_dim]
            length = sizes["source" if meta.name.startswith("cross") else "past"]
            dims = (shape[0], shape[1], rows, shape[3], length, shape[5])
            feed[meta.name] = rng.standard_normal(dims).astype(np.float32)
    return feed


def profile_decoder(
    path: Path, label: str, rows: int, threads: int, source: int = 10, past: int = 6
) -> StepProfile:
    """The step's mean time, then ONNX Runtime's per-kernel profile of the same step."""
    session = _session(path, threads, profile=False)
    feed = _feed(session, rows, source, past)
    for _ in range(30):
        session.run(None, feed)
    start = time.perf_counter()
    for _ in range(TIMED_STEPS):
        session.run(None, feed)
    step_ms = (time.perf_counter() - start) / TIMED_STEPS * 1e3
    profiled = _session(path, threads, profile=True)
    for _ in range(PROFILED_STEPS):
        profiled.run(None, feed)
    events = json.loads(Path(profiled.end_profiling()).read_text())
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    runs = sum(1 for e in events if e.get("cat") == "Session" and e["name"] == "model_run")
    time_by_op, count_by_op = Counter(), Counter()
    for event in kernels:
        time_by_op[event["args"]["op_name"]] += event["dur"]
        count_by_op[event["args"]["op_name"]] += 1
    total = sum(time_by_op.values()) or 1
    return StepProfile(
        label=label,
        rows=rows,
        step_ms=step_ms,
        kernels=round(len(kernels) / runs),
        bookkeeping_kernels=round(sum(count_by_op[o] for o in BOOKKEEPING) / runs),
        bookkeeping_share=sum(time_by_op[o] for o in BOOKKEEPING) / total,
        matrix_share=sum(time_by_op[o] for o in MATRIX) / total,
    )
