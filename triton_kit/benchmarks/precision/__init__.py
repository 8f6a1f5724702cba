"""Accuracy and CPU speed of FP32/FP16/INT8 for every family (``run``); results/precision.md."""
