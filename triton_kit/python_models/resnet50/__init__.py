"""ResNet-50's python models.

- ``image``: the pure pre/post-processing functions (``preprocess``, ``decode_image``,
  ``top_k``, ``ImageLimits``, ``PreprocessSpec``) that the models, tests and benchmarks share.
- ``gpu``: ``TorchPreprocess``, nvJPEG decode and torch resize on a ``KIND_GPU`` instance.
- ``model``: the served models ``ImagePreprocessor``, ``RawImagePreprocessor``,
  ``TopKPostprocessor``.
"""
