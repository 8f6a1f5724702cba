"""Which backend serves each model of a repository, read from its config.pbtxt files.

The launcher refuses to start when a model needs a native backend that is not there (no
silent fallback), and ``server serve`` prints this table so a user sees what runs what.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from triton_kit.server.native_backends import SERVED_BACKENDS, TRITON_BACKENDS

_PLATFORM_BACKENDS = {
    "ensemble": "ensemble",
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
}
# What the backend table says of each native backend (whose sources built it).
_NATIVE_ORIGIN = {name: "Triton's own, r24.10" for name in TRITON_BACKENDS} | {
    "pytorch_aoti": "Triton's own pytorch backend for AOTInductor packages, "
    "third_party/triton-aoti",
    "ctranslate2": "the kit's own C++ backend over the ctranslate2 wheel's library",
}


def read_config(path: Path) -> model_config_pb2.ModelConfig:
    config = model_config_pb2.ModelConfig()
    text_format.Parse(path.read_text(), config, allow_unknown_field=True)
    return config


def model_backends(repository: Path) -> dict[str, str]:
    """``{model: backend name}`` for every model folder with a config.pbtxt."""
    found = {}
    for config_path in sorted(Path(repository).glob("*/config.pbtxt")):
        config = read_config(config_path)
        name = config.name or config_path.parent.name
        found[name] = config.backend or _PLATFORM_BACKENDS.get(config.platform, config.platform)
    return found


def backend_table(repository: Path) -> list[tuple[str, str]]:
    """``(model, what serves it)`` rows for people: Triton's own backends named as such."""
    rows = []
    for model, backend in model_backends(repository).items():
        if backend in _NATIVE_ORIGIN:
            rows.append((model, f"{backend} ({_NATIVE_ORIGIN[backend]})"))
        else:
            rows.append((model, backend))
    return rows


def ct2_text_models(repository: Path) -> list[str]:
    """The models of ``repository`` served by the kit's ctranslate2 backend in its text mode
    (parameter ``source_spm``: the default ``nmt``), which needs the backend built with
    sentencepiece."""
    models = []
    for config_path in sorted(Path(repository).glob("*/config.pbtxt")):
        config = read_config(config_path)
        if config.backend == "ctranslate2" and "source_spm" in config.parameters:
            models.append(config.name or config_path.parent.name)
    return models


def native_backends_needed(repository: Path) -> dict[str, list[str]]:
    """``{native backend: [models]}`` for the models that Triton's own backends serve."""
    needed: dict[str, list[str]] = {}
    for model, backend in model_backends(repository).items():
        if backend in SERVED_BACKENDS:
            needed.setdefault(backend, []).append(model)
    return needed
