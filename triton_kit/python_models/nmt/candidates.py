"""Each row's best tokens inside ONNX Runtime: the CPU step model's side of the search.

The numpy path (:func:`triton_kit.python_models.nmt.decode.row_candidates`) took 24-37 ms a
step over opus-mt-en-de's 58k-token logits at 128 rows, a third of a beam-4 call at
concurrency 32; the same log_softmax and TopK as a small ONNX graph run in C++ on the
session's threads (10.5 ms on 2 threads; at 44 rows on 1 thread 3.8 ms with ONNX's fused
LogSoftmax, 4.7 with it spelt out, 7.3 in numpy). The graph computes what the numpy path
computes: log_softmax over every token (HF takes it before the processors), the banned
tokens set to -inf, then the ``k`` best per row, ties to the lower id (TopK's rule). Python
3.10 compatible.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from triton_kit.python_models.common.ort_session import SessionSettings, create_session
from triton_kit.python_models.nmt.decode import best_first


def candidates_graph() -> bytes:
    """``(logits [r, v], k [1]) -> (values [r, k], ids [r, k])``, serialised: each row's ``k``
    best log-probs. No ban in the graph: adding a [v] row of -inf was one more pass over the
    [rows, 58k] log-probs (read and written); the caller asks for ``len(banned)`` more and
    drops the banned ids from the few it gets."""
    from onnx import TensorProto, helper

    def node(op: str, inputs: list[str], outputs: list[str], **attributes):
        return helper.make_node(op, inputs, outputs, **attributes)

    nodes = [
        node("LogSoftmax", ["logits"], ["log_probs"], axis=1),  # one fused MLAS kernel
        node("TopK", ["log_probs", "k"], ["values", "ids"], axis=1, largest=1, sorted=1),
    ]
    graph = helper.make_graph(
        nodes,
        "row_candidates",
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["rows", "vocab"]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, ["rows", "keep"]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["rows", "keep"]),
        ],
    )
    # IR 8 is what opset 17 needs; onnx's default (its newest, 14 in onnx 1.23) is more than
    # the ONNX Runtime of a stub may read (1.20 reads up to 10, 1.30 up to 13).
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


class OrtCandidates:
    """``(logits, keep, suppressed) -> (values, tokens)`` as ``row_candidates`` returns them."""

    def __init__(self, threads: int) -> None:
        settings = SessionSettings(intra_op_threads=threads, inter_op_threads=1)
        self.session = create_session(candidates_graph(), settings)

    def __call__(
        self, logits: np.ndarray, keep: int, suppressed: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``keep + len(suppressed)`` best, the suppressed ones set to -inf: at least
        ``keep`` others remain, and :func:`best_first` puts them first in TopK's order."""
        vocab = logits.shape[1]
        feed = {
            "logits": np.ascontiguousarray(logits, dtype=np.float32),
            "k": np.array([min(keep + len(suppressed), vocab)], dtype=np.int64),
        }
        values, ids = self.session.run(None, feed)
        if suppressed:
            values[np.isin(ids, list(suppressed))] = -np.inf
        return best_first(values, ids, keep)
