"""The engines, one axis of the build: what a verified, precision-lowered ONNX becomes.

``registry`` names them (``--engine``), ``step`` is what each engine's module defines:
``onnxruntime`` (serve the ONNX as it is), ``torchscript`` (TorchScript for Triton's
pytorch backend), ``tensorrt`` (a plan, where TensorRT exists). ``onnx_export`` and
``fusion`` make and optimise the ONNX every engine starts from.
"""
