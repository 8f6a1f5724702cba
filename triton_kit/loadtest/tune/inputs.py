"""perf_analyzer input data for a model, from the kit's own corpora.

perf_analyzer makes up numeric tensors of fixed shape by itself, but not text or encoded
images: a model with BYTES inputs gets a JSON file (perf_analyzer's ``--input-data``
format) of sentences or photos-like images from :mod:`triton_kit.loadtest.corpora`, varied as real
traffic is. Optional inputs are left out, as most clients leave them out.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.loadtest import corpora
from triton_kit.loadtest.tune.errors import TuneError

SAMPLES = 64
_IMAGE_NAMES = ("IMAGE",)


def input_data(config: mc.ModelConfig, seed: int = 0) -> dict | None:
    """The ``--input-data`` JSON for ``config``, or None where perf_analyzer's own will do."""
    required = [t for t in config.input if not t.optional]
    text = [t for t in required if t.data_type == mc.TYPE_STRING]
    if not text:
        _check_fixed_shapes(config, required)
        return None
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


def _check_fixed_shapes(config: mc.ModelConfig, required: list) -> None:
    variable = [t.name for t in required if any(d < 0 for d in t.dims)]
    if variable:
        raise TuneError(
            f"{config.name}: inputs {variable} have variable dimensions and take ids, not "
            "text, so perf_analyzer cannot make them up; tune the model that takes text "
            "(e.g. bert for bert_model)"
        )


def write(config: mc.ModelConfig, path: Path) -> Path | None:
    data = input_data(config)
    if data is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path
