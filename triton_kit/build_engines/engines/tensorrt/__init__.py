"""TensorRT plans from precision-lowered ONNX, written against the documented API.

Nothing here imports ``tensorrt`` at module level: profiles, trtexec command
lines, tensorrt_plan configs and sidecars work (and are tested) where TensorRT
is absent; only :mod:`triton_kit.build_engines.engines.tensorrt.builder` needs it, through
:func:`triton_kit.build_engines.engines.tensorrt.lazy.import_tensorrt`.
"""
