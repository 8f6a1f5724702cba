"""Build Triton model repositories: ONNX export, verification, precision, TensorRT plans."""
