"""The ONE place engines are registered: ``--engine`` name -> the module holding its step."""

from __future__ import annotations

from enum import Enum


class Engine(Enum):
    """What a served ONNX model becomes.

    Each member is ``--engine`` NAME and the module (imported only when chosen) holding its
    step (:class:`triton_kit.build_engines.engines.step.EngineStep`). A new engine is one line
    here plus its module."""

    ONNXRUNTIME = "onnxruntime", "triton_kit.build_engines.engines.onnxruntime"
    TENSORRT = "tensorrt", "triton_kit.build_engines.engines.tensorrt.engine"
    TORCH = "torch", "triton_kit.build_engines.engines.torchscript.engine"
    AOTI = "aoti", "triton_kit.build_engines.engines.aoti.engine"
    CTRANSLATE2 = "ctranslate2", "triton_kit.build_engines.engines.ctranslate2"

    def __new__(cls, flag: str, module: str) -> Engine:
        member = object.__new__(cls)
        member._value_ = flag
        member.module = module
        return member


ENGINE_NAMES = [engine.value for engine in Engine]
