"""What every python model shares; no family-specific code, no import of a family package.

Public surface, by module (imported from the module, so importing this package stays light):

- ``base``: ``PythonModel`` (the one base class), ``InvalidInput``, ``Arrays``,
  ``array_response``, ``error_response``, ``ExecuteProfile``, ``PROFILE_DIR_ENV``.
- ``parameters``: ``ModelParameters`` (strict typed reads of a config's parameters).
- ``contracts``: tensor names and defaults the build, the models and the client agree on.
- ``bls``: ``infer`` (one BLS call). ``sibling``: ``sibling_file``, ``sibling_device``.
- ``ort_session``: ``SessionSettings``, ``create_session``, ``threaded``.
- ``cuda_graphs``: ``CudaGraph`` and the graph-shape helpers.
- ``torchscript``: ``TorchScriptModel``, TorchScript with CUDA graphs per batch bucket (what
  Triton's own pytorch backend cannot do).
- ``serving_policy``: ``QueuePolicy`` and its two shipped values.
- ``tensorrt_sidecar``: ``Sidecar``, ``SIDECAR_NAME``; ``python -m`` prints the backend config.
"""
