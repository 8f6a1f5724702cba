"""Export a PyTorch module to ONNX and check ONNX Runtime against it."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

DEFAULT_OPSET = 17


def export(
    module: object,
    example_inputs: tuple,
    path: Path,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
    opset: int = DEFAULT_OPSET,
) -> Path:
    """TorchScript-based export: no onnxscript dependency, stable dynamic axes."""
    import torch

    module.eval()  # a wrapper nn.Module starts in training mode; BatchNorm would then differ
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            example_inputs,
            str(path),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes={k: dict(v) for k, v in dynamic_axes.items()},
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    import onnx

    onnx.checker.check_model(str(path))
    return path


def pin_output_dims(path: Path, dims: Mapping[str, Mapping[int, int]]) -> Path:
    """Write fixed sizes into outputs the exporter left symbolic (e.g. a bidirectional GRU's
    concatenated width): Triton's onnxruntime backend compares configured output shapes with
    the file's exactly, so the file must say what the config says."""
    import onnx

    model = onnx.load(str(path))
    for output in model.graph.output:
        for axis, size in dims.get(output.name, {}).items():
            dim = output.type.tensor_type.shape.dim[axis]
            dim.Clear()
            dim.dim_value = size
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def max_abs_diff_vs_torch(
    module: object, path: Path, feeds: Mapping[str, np.ndarray], threads: int = 0
) -> dict[str, float]:
    """Run the same inputs through PyTorch and ONNX Runtime; max |difference| per output."""
    import torch

    from triton_kit.python_models.common.ort_session import create_session, threaded

    session = create_session(path, threaded(threads))
    names = [o.name for o in session.get_outputs()]
    ort_out = session.run(names, dict(feeds))
    module.eval()
    with torch.no_grad():
        torch_out = module(*[torch.from_numpy(v) for v in feeds.values()])
    if isinstance(torch_out, torch.Tensor):
        torch_out = (torch_out,)
    return {
        name: float(np.max(np.abs(ort - ref.numpy())))
        for name, ort, ref in zip(names, ort_out, torch_out, strict=False)
    }


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
