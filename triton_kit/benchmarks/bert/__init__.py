"""BERT: in-process ONNX Runtime against Triton through the SDK and perf_analyzer (``run``,
results/bert.md); one stub with the whole thread budget against N single-thread instances
(``topology``, ``python -m triton_kit.benchmarks.bert.topology``, results/bert_topology*.md)."""
