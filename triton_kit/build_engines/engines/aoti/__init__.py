"""``--engine aoti``: an AOTInductor package ``model.pt2`` served by ``pytorch_aoti``.

The family's PyTorch module is exported with ``torch.export`` (dynamic batch up to the
config's ``max_batch_size``), compiled by ``torch._inductor.aoti_compile_and_package``,
checked against the verified ONNX as ``--engine torch`` is, and written as ``backend:
"pytorch_aoti"``, ``platform: "torch_aoti"``: Triton's newer pytorch backend, built for the
embedded server by ``python -m triton_kit.server.native_backends build pytorch_aoti``
(issue 30). The official 24.10 container has no such backend.
"""
