"""The torch step model drives the same search as ONNX Runtime, token for token (CPU here)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.torchscript.steps import step_model
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.transformer import decode_settings, limits
from triton_kit.python_models.nmt.decode import Job, generate, pad_sources
from triton_kit.python_models.nmt.ort import OrtStepModel
from triton_kit.python_models.nmt.text import MarianText

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.fixture(scope="module")
def engines(nmt_python_search):
    from transformers import MarianMTModel

    model = MarianMTModel.from_pretrained(str(DEFAULT_CHECKPOINT), attn_implementation="eager")
    ort_model = OrtStepModel(
        nmt_python_search / "nmt_encoder" / "1" / "model.onnx",
        nmt_python_search / "nmt_decoder" / "1" / "model.onnx",
        threads=1,
    )
    torch_model = step_model(model.eval(), device="cpu")
    text = MarianText(nmt_python_search / "nmt" / "1", limits(model, 16).max_source_length)
    return decode_settings(model), text, ort_model, torch_model


def _jobs(text: MarianText, beams: list[int], max_lengths: list[int]) -> list[Job]:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    sources = [corpus.english(n) for n in split.test[: len(beams)]]
    return [Job(text.encode(s), b, m) for s, b, m in zip(sources, beams, max_lengths, strict=True)]


@pytest.mark.parametrize(
    ("beams", "max_lengths", "length_penalty"),
    [([1] * 24, [64] * 24, 1.0), ([4] * 24, [64] * 24, 1.0), ([1, 4, 3] * 8, [9, 64, 14] * 8, 0.6)],
)
def test_torch_matches_onnxruntime_token_for_token(engines, beams, max_lengths, length_penalty):
    settings, text, ort_model, torch_model = engines
    settings = dataclasses.replace(settings, length_penalty=length_penalty)
    jobs = _jobs(text, beams, max_lengths)
    expected = generate(ort_model, jobs, settings)
    assert generate(torch_model, jobs, settings) == expected
    assert len({len(row) for row in expected}) >= 3  # varied lengths: rows left at varied steps


def test_torch_state_stays_a_device_tensor(engines):
    """The cache is reordered by the step (``beam_index``) and the cross state by ``take``,
    both on the device, never turned into numpy."""
    settings, text, _, torch_model = engines
    (job,) = _jobs(text, [1], [8])
    ids = np.array([job.source_ids]), np.ones((1, len(job.source_ids)), dtype=np.int64)
    cross = torch_model.encode(*ids)
    layers, heads, head_dim = settings.cache_shape
    past = np.zeros((layers, 2, 1, heads, 0, head_dim), np.float32)
    start = np.array([[settings.decoder_start_token_id]])
    logits, present = torch_model.step(start, ids[1], cross, past, np.array([0]))
    assert isinstance(cross, torch.Tensor) and isinstance(present, torch.Tensor)
    assert isinstance(logits, torch.Tensor) and present.shape[4] == 1  # stays on the device
    again = np.array([[5], [6]])
    _, grown = torch_model.step(
        again, ids[1][[0, 0]], torch_model.take(cross, [0, 0]), present, [0, 0]
    )
    assert isinstance(grown, torch.Tensor) and grown.shape[2] == 2 and grown.shape[4] == 2
    assert torch.equal(grown[:, :, 0, :, :1], grown[:, :, 1, :, :1])  # the one past row, twice
    twice = torch_model.take(present, np.array([0, 0]))
    assert isinstance(twice, torch.Tensor) and twice.shape[2] == 2
    assert torch.equal(twice[:, :, 0], twice[:, :, 1])


def test_each_in_process_engine_brings_its_own_candidates(engines):
    """Both in-process step models pick each row's best tokens inside their engine (ONNX
    Runtime's TopK, torch's topk), not through numpy over [rows, vocab] logits."""
    from triton_kit.python_models.nmt.decode import candidates_of, row_candidates

    _, _, ort_model, torch_model = engines
    assert candidates_of(ort_model) is not row_candidates
    assert candidates_of(torch_model) == torch_model.candidates


def test_candidates_on_the_device_match_the_numpy_search(engines):
    """Each row's best tokens come from the device, [rows, keep]: the same tokens as the
    numpy path over the same logits, log-probs within float32 rounding."""
    from triton_kit.python_models.nmt.decode import row_candidates

    settings, text, _, torch_model = engines
    jobs = _jobs(text, [1, 1, 1], [8, 8, 8])
    ids, mask = pad_sources(jobs, settings.pad_token_id)
    layers, heads, head_dim = settings.cache_shape
    past = np.zeros((layers, 2, len(jobs), heads, 0, head_dim), np.float32)
    start = np.full((len(jobs), 1), settings.decoder_start_token_id)
    rows = np.arange(len(jobs))
    logits, _ = torch_model.step(start, mask, torch_model.encode(ids, mask), past, rows)
    suppressed = settings.suppressed_token_ids
    values, tokens = torch_model.candidates(logits, 8, suppressed)
    expected_values, expected_tokens = row_candidates(logits.cpu().numpy(), 8, suppressed)
    assert isinstance(values, np.ndarray) and values.shape == tokens.shape == (3, 8)
    assert tokens.tolist() == expected_tokens.tolist()
    np.testing.assert_allclose(values, expected_values, rtol=0, atol=2e-6)
    assert not set(suppressed) & set(tokens.ravel().tolist())


def test_gpu_benchmark_entry_point_runs_the_torch_engine(engines):
    """triton_kit.benchmarks.nmt.run.step_model_throughput, which the H100 run calls, on CPU
    and small."""
    from triton_kit.benchmarks.nmt.in_process import step_model_throughput

    _, _, _, torch_model = engines
    cells = step_model_throughput(lambda: torch_model, levels=(1, 4), sentences=8)
    assert [c.concurrency for c in cells] == [1, 4]
    for cell in cells:
        assert cell.exact == 1.0 and len(cell.latencies_s) == 8
        assert cell.phases["decoder ms/step"] > 0 and 0 < cell.phases["search share"] < 1


def test_a_failing_batch_reaches_its_callers_instead_of_hanging_them():
    """triton_kit.benchmarks.nmt's micro-batcher: an exception in the batch call used to kill its
    worker thread and leave every caller waiting forever (seen: a search that could not
    read a model's device logits hung the GPU benchmark's test)."""
    from concurrent.futures import ThreadPoolExecutor

    from triton_kit.benchmarks.nmt.measure import MicroBatcher

    def broken(texts, beam, done):
        raise RuntimeError(f"cannot decode {len(texts)} texts")

    batcher = MicroBatcher(broken, beam=4)
    with ThreadPoolExecutor(3) as pool:
        calls = [pool.submit(batcher, text) for text in ("a", "b", "c")]
        for call in calls:
            with pytest.raises(RuntimeError, match=r"cannot decode \d texts"):
                call.result(timeout=10)
    batcher.close()  # the worker is still alive to take the close
