"""NMT's python models: the decode loop inside Triton.

- ``model``: ``NmtModel``, the served ``nmt`` / ``nmt_rnn`` (text in, translation out).
- ``decode``: the greedy and beam search (``generate``, ``Job``, ``DecodeSettings``,
  ``StepModel``), in numpy, shared with the build's calibration and the benchmarks.
- ``settings``: decode settings ⇄ config parameters, and ``Limits`` per request.
- ``text``: ``MarianText``, text ⇄ ids with sentencepiece.
- step models: ``ort`` (ONNX Runtime in-process), ``candidates`` (top-k inside ONNX
  Runtime), ``torch_steps`` (TorchScript on GPU or CPU), ``timing`` (a timing wrapper).
"""
