"""Compare a lower-precision model with its FP32 source on the same inputs, with ONNX Runtime.

Generic metrics (any model): per-output max abs error, cosine of each sample's
output to FP32's, and argmax agreement. Family metrics (top-k agreement,
embedding cosine, exact match, BLEU) are small functions here too, so the
build's report and ``triton_kit/benchmarks/precision/run.py`` compute them the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

Feeds = Mapping[str, np.ndarray]


def session(path: Path, threads: int = 0):
    """A session configured as the served one (``--threads``: intra-op threads)."""
    from triton_kit.python_models.common.ort_session import create_session, threaded

    return create_session(path, threaded(threads))


def run_all(sess, feeds: Iterable[Feeds]) -> dict[str, list[np.ndarray]]:
    """Outputs for every feed, by output name (one array per feed)."""
    names = [o.name for o in sess.get_outputs()]
    inputs = {i.name for i in sess.get_inputs()}
    results: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for feed in feeds:
        values = sess.run(names, {k: v for k, v in feed.items() if k in inputs})
        for name, value in zip(names, values, strict=True):
            results[name].append(np.asarray(value, dtype=np.float64))
    return results


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of matching rows (first axis = samples, the rest flattened)."""
    a2 = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(1, -1)
    b2 = b.reshape(b.shape[0], -1) if b.ndim > 1 else b.reshape(1, -1)
    dot = np.sum(a2 * b2, axis=1)
    norms = np.linalg.norm(a2, axis=1) * np.linalg.norm(b2, axis=1)
    return np.where(norms > 0, dot / np.maximum(norms, 1e-30), 1.0)


def topk_agreement(reference: np.ndarray, candidate: np.ndarray, k: int) -> float:
    """Share of rows whose FP32 top-1 class is within the candidate's top-k."""
    top1 = reference.argmax(axis=-1)
    topk = np.argsort(-candidate, axis=-1)[..., :k]
    return float(np.mean([t in row for t, row in zip(top1, topk, strict=True)]))


def compare_outputs(
    reference: Mapping[str, Sequence[np.ndarray]], candidate: Mapping[str, Sequence[np.ndarray]]
) -> dict[str, dict[str, float]]:
    """Generic per-output metrics over all feeds."""
    metrics: dict[str, dict[str, float]] = {}
    for name, ref_list in reference.items():
        cand_list = candidate[name]
        errors = [
            float(np.max(np.abs(r - c))) if r.size else 0.0
            for r, c in zip(ref_list, cand_list, strict=True)
        ]
        cosines = np.concatenate(
            [cosine_rows(r, c) for r, c in zip(ref_list, cand_list, strict=True) if r.size]
        )
        entry = {
            "max_abs_error": max(errors),
            "max_abs_reference": max(float(np.max(np.abs(r))) if r.size else 0.0 for r in ref_list),
            "mean_cosine": float(np.mean(cosines)),
            "min_cosine": float(np.min(cosines)),
        }
        if ref_list[0].ndim >= 2 and ref_list[0].shape[-1] > 1:
            agree = [
                np.mean(r.argmax(-1) == c.argmax(-1))
                for r, c in zip(ref_list, cand_list, strict=True)
            ]
            entry["argmax_agreement"] = float(np.mean(agree))
        metrics[name] = entry
    return metrics


def accuracy_report(
    fp32_path: Path, candidate_path: Path, feeds: Sequence[Feeds], threads: int = 0
) -> dict[str, object]:
    """FP32 vs candidate on ``feeds``: the JSON written beside every lowered model."""
    reference = run_all(session(fp32_path, threads), feeds)
    candidate = run_all(session(candidate_path, threads), feeds)
    return {"samples": len(feeds), "outputs": compare_outputs(reference, candidate)}


def write_report(report: Mapping[str, object], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return path


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (sacrebleu) of ``hypotheses`` against one reference each."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    return float(np.mean([h == r for h, r in zip(hypotheses, references, strict=True)]))
