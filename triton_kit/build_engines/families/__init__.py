"""The model families, one axis of the build: what is exported and how it is served.

Each family (``bert``, ``resnet50``, ``nmt``) loads or trains its model, exports and
verifies it, and writes its ensemble or python models; the engine a verified ONNX becomes
is the other axis (:mod:`triton_kit.build_engines.engines`), and precision the third
(:mod:`triton_kit.build_engines.precision`). ``python -m triton_kit.build_engines FAMILY``.
"""
