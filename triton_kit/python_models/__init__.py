"""Code behind the python-backend models in model_repository/, one subpackage per family.

- :mod:`triton_kit.python_models.common`: what every python model shares (the base class,
  parameters, contracts with the build and the client, BLS, ONNX Runtime sessions, CUDA
  graphs, the queue policy, the TensorRT sidecar).
- :mod:`triton_kit.python_models.resnet50`, :mod:`triton_kit.python_models.bert`,
  :mod:`triton_kit.python_models.nmt`: each family's models and the pure functions they call.

Each model's ``model.py`` in the repository is a one-line import of a class from a family's
``model`` module (or ``bert.text`` for the stand-alone tokenizer). Runs on Python 3.10 (the
official 24.10 container) and newer. Nothing here imports ``build_engines``.
"""
