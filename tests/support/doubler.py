"""A python model that doubles its FP32 [4] input: the smallest model a real Triton serves,
for tests of the server around it (metrics, launcher flags). The product's copy
(triton_kit.benchmarks.harness.tiny_model, the launcher row's --tiny) is the one."""

from __future__ import annotations

from triton_kit.benchmarks.harness.tiny_model import DOUBLER_MODEL, doubler_config, write_doubler

__all__ = ["DOUBLER_MODEL", "doubler_config", "write_doubler"]
