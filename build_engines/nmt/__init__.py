"""NMT (Marian): export encoder and KV-cache decoder ONNX, write the nmt BLS models.

Placeholder while the export lands; build_engines/nmt/train.py trains the default model.
"""
