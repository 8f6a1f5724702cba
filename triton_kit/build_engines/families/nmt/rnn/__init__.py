"""The recurrent (GRU) encoder-decoder: the second NMT architecture beside the Transformer.

Its model (``model``) and what the shared build steps need of it (``architecture``); the
pipeline, training, export and TorchScript search are the parent package's, for both.
"""
