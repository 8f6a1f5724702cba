"""NMT's TorchScript pieces: the step models, and the whole search with its own encoder and step.

NMT-only, so they live with the family; the generic TorchScript engine
(:mod:`triton_kit.build_engines.engines.torchscript`) imports nothing from here.
"""
