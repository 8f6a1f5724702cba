"""perf_analyzer input data for a model, from the kit's own corpora.

perf_analyzer makes up numeric tensors of fixed shape by itself, but not text or encoded
images: a model with BYTES inputs gets a JSON file (perf_analyzer's ``--input-data``
format) of sentences or photos-like images from :mod:`triton_kit.loadtest.corpora`, varied as real
traffic is. Numeric inputs with a variable dimension (bert_model's token ids and mask) take
the shape given with ``--shape`` and are sent as ones: valid token ids and a full mask, since
an engine's speed depends on the shape, not on the ids (perf_analyzer's random integers
would index past the vocabulary). Optional inputs are left out, as most clients leave them out.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.loadtest import corpora
from triton_kit.loadtest.tune.errors import TuneError
from triton_kit.loadtest.tune.options import parse_shape

SAMPLES = 64
_IMAGE_NAMES = ("IMAGE",)


def input_data(config: mc.ModelConfig, seed: int = 0, shapes: tuple[str, ...] = ()) -> dict | None:
    """The ``--input-data`` JSON for ``config``, or None where perf_analyzer's own will do."""
    required = [t for t in config.input if not t.optional]
    text = [t for t in required if t.data_type == mc.TYPE_STRING]
    if not text:
        if not any(d < 0 for t in required for d in t.dims):
            return None
        return _ones(config, required, dict(parse_shape(s) for s in shapes))
    if len(text) != len(required):
        raise TuneError(f"{config.name}: mixed text and numeric inputs need your own input data")
    texts = corpora.sentences(SAMPLES // 2, seed) + corpora.number_phrases(SAMPLES // 2, seed)
    images = None
    rows = []
    for index in range(SAMPLES):
        row = {}
        for tensor in text:
            if tensor.name in _IMAGE_NAMES:
                images = images or corpora.images(SAMPLES, corpora.SMALL_SIDES, seed)
                row[tensor.name] = {"b64": base64.b64encode(images[index].data).decode()}
            else:
                row[tensor.name] = {"content": [texts[index]], "shape": list(tensor.dims)}
        rows.append(row)
    return {"data": rows}


_INTEGER = {mc.TYPE_INT8, mc.TYPE_INT16, mc.TYPE_INT32, mc.TYPE_INT64, mc.TYPE_UINT8,
            mc.TYPE_UINT16, mc.TYPE_UINT32, mc.TYPE_UINT64}  # fmt: skip
_FLOAT = {mc.TYPE_FP16, mc.TYPE_FP32, mc.TYPE_FP64}


def _ones(config: mc.ModelConfig, required: list, shapes: dict[str, tuple[int, ...]]) -> dict:
    """One request of ones per input, variable dims from ``shapes``; a TuneError naming the
    inputs that lack a shape or whose shape does not fit their dims."""
    row = {}
    for tensor in required:
        dims = tuple(tensor.dims)
        if all(d >= 0 for d in dims) and tensor.name not in shapes:
            shape = dims
        elif tensor.name not in shapes:
            raise TuneError(
                f"{config.name}: input {tensor.name} has a variable dimension {list(dims)}; "
                f"give its shape, e.g. --shape {tensor.name}:"
                + ",".join(str(d) if d >= 0 else "64" for d in dims)
                + " (or tune the model that takes text, e.g. bert for bert_model)"
            )
        else:
            shape = shapes[tensor.name]
            if len(shape) != len(dims) or any(
                d >= 0 and d != s for d, s in zip(dims, shape, strict=True)
            ):
                raise TuneError(
                    f"{config.name}: --shape {tensor.name}:{','.join(map(str, shape))} does "
                    f"not fit its dims {list(dims)}"
                )
        if tensor.data_type in _INTEGER:
            one: int | float = 1
        elif tensor.data_type in _FLOAT:
            one = 1.0
        else:
            raise TuneError(
                f"{config.name}: input {tensor.name} ({mc.DataType.Name(tensor.data_type)}) "
                "with a variable dimension needs your own input data"
            )
        count = 1
        for size in shape:
            count *= size
        row[tensor.name] = {"content": [one] * count, "shape": list(shape)}
    return {"data": [row]}


def write(config: mc.ModelConfig, path: Path, shapes: tuple[str, ...] = ()) -> Path | None:
    data = input_data(config, shapes=shapes)
    if data is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path
