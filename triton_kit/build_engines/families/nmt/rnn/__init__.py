"""The recurrent (GRU) encoder-decoder: the second NMT architecture beside the Transformer.

Its training, export, pipeline and TorchScript search mirror the Transformer's modules in
the parent package.
"""
