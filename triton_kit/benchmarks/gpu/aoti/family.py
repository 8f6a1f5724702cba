"""The models the AOTInductor benchmark builds, checks, serves and loads (``--family``).

A :class:`Family` holds what differs between ResNet-50 and the BERT encoders: the eager module,
the served inputs and output, the batch sizes, the loads' concurrency, how the package's
outputs are compared with the eager module's, and what perf_analyzer sends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.models import bert, resnet50_uint8
from triton_kit.benchmarks.gpu.settings import Settings

BERT_VOCAB = 30522  # BertConfig's default vocab_size, which models.bert keeps


@dataclass(frozen=True)
class Family:
    """One model as the benchmark builds, checks, serves and loads it."""

    prefix: str  # served model names (``<prefix>_i2_d2000p``), so the report's keys
    report: str  # the results file in --out
    make: Callable[[Settings], object]  # the eager module (on the CPU; moved by the caller)
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # INPUT__0..: Triton type, one item's dims
    example: Callable[[np.random.Generator, int], list[np.ndarray]]  # a batch of inputs
    output_dims: int  # OUTPUT__0: FP32 [output_dims] an item
    max_batch: int  # the export's dynamic batch and the config's max_batch_size
    preferred: tuple[int, ...]  # the batched rows' preferred batch sizes
    concurrency: int  # perf_analyzer's one-item clients on the batched rows
    # In-process batch sizes: besides 1 and the largest, those a served load forms (its note's
    # "batch": ResNet-50 c256 about 42 rows on four instances, session 45), so that a served
    # rate can be read against the engine's own at the batches it ran.
    batches: tuple[int, ...]
    agreement: Callable[[object, object], dict]  # outputs vs the eager module's, beside max diff
    channels_last: bool = False
    baseline: bool = False  # has a TorchScript row through Triton's r24.10 pytorch backend
    input_data: Callable[[Path], str] = lambda _: "random"  # perf_analyzer's --input-data

    @property
    def output_bytes(self) -> int:
        return self.output_dims * 4


def images(rng: np.random.Generator, batch: int) -> list[np.ndarray]:
    return [rng.integers(0, 256, (batch, 224, 224, 3), dtype=np.uint8)]


def sequences(seq: int, padded: bool = True) -> Callable[..., list[np.ndarray]]:
    """Token ids within the vocabulary and attention masks: the first row full, the others
    (when ``padded``) of random lengths from half the sequence up (padding is the mask path
    the batcher mixes)."""

    def make(rng: np.random.Generator, batch: int) -> list[np.ndarray]:
        ids = rng.integers(0, BERT_VOCAB, (batch, seq), dtype=np.int64)
        mask = np.ones((batch, seq), dtype=np.int64)
        if padded:
            for row, length in enumerate(rng.integers(seq // 2, seq + 1, batch)[1:], 1):
                mask[row, length:] = 0
        return [ids, mask]

    return make


def sequence_data(seq: int, requests: int = 16) -> Callable[[Path], str]:
    """perf_analyzer's ``--input-data`` file: ``requests`` sequences of valid ids, full masks."""
    from triton_kit.benchmarks.harness import perf_analyzer

    def write(path: Path) -> str:
        ids, mask = sequences(seq, padded=False)(np.random.default_rng(1), requests)
        rows = [{"INPUT__0": i, "INPUT__1": m} for i, m in zip(ids, mask, strict=True)]
        return perf_analyzer.tensor_inputs(path, rows)

    return write


def top1(y, expected) -> dict:
    return {"top1_agreement": float((y.argmax(1) == expected.argmax(1)).float().mean())}


def cosine(y, expected) -> dict:
    import torch

    similarity = torch.nn.functional.cosine_similarity(y.double(), expected.double(), dim=1)
    return {"cosine_min": float(similarity.min())}


def families(smoke: bool) -> dict[str, Family]:
    """Full size on the GPU; ``smoke``: BERT of one layer, 64 wide, 16 tokens (models.bert)."""
    seq = 16 if smoke else 128
    small = (1, 2) if smoke else None
    found = {
        "resnet50": Family(
            "aoti", "aoti.json", resnet50_uint8, (("UINT8", (224, 224, 3)),), images, 1000,
            256, (64, 128, 256), 256, small or (1, 32, 64, 128, 256), top1, channels_last=True,
            baseline=True,
        ),
    }  # fmt: skip
    for name, (layers, hidden, heads) in {"bert-base": (12, 768, 12),
                                          "bert-large": (24, 1024, 16)}.items():  # fmt: skip
        found[name] = Family(
            name.replace("-", "_") + "_aoti", f"aoti-{name}.json",
            lambda s, shape=(layers, hidden, heads): bert(s, *shape),
            (("INT64", (seq,)), ("INT64", (seq,))), sequences(seq), 64 if smoke else hidden,
            64, (16, 32, 64), 64, small or (1, 16, 32, 64), cosine, input_data=sequence_data(seq),
        )  # fmt: skip
    return found


FAMILIES = tuple(families(False))
