"""ResNet-50: in-process ONNX Runtime against Triton (``run``); results/resnet50.md."""
