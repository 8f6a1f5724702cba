"""The in-engine search (ONNX Runtime's BeamSearch over the exported subgraphs) against
Hugging Face ``generate`` and against the Python search it replaces, id for id.

Two checkpoints: the default number model, and the seeded random small Marian of
test_nmt_parity (its hypotheses end at varied lengths, so a wrong length penalty, EOS
handling or forced EOS shows). The graph is called once per batch, as served: its Loop runs
the operator one sentence at a time (triton_kit/python_models/nmt/generate.py says why).
"""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from tests.build.build_engines.test_nmt_parity import _random_checkpoint, _random_sources
from tests.support.nmt_reference import InProcess, hf_generate
from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.export import export_decoder, export_encoder
from triton_kit.build_engines.families.nmt.generation_graph import SearchTokens, export_generation
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.build_engines.families.nmt.transformer import TRANSFORMER, decode_settings
from triton_kit.python_models.nmt.decode import Job
from triton_kit.python_models.nmt.generate import generate_graph

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


class Graph:
    """The generation graph of one checkpoint, in an ONNX Runtime session."""

    def __init__(self, model, checkpoint: Path, work: Path) -> None:
        self.settings = decode_settings(model)
        vocab = model.config.decoder_vocab_size or model.config.vocab_size
        path = export_generation(
            model, SearchTokens.of(self.settings, vocab), work / "generate.onnx", work
        )
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.python = InProcess(
            model,
            checkpoint,
            export_encoder(TRANSFORMER, model, work / "encoder.onnx"),
            export_decoder(TRANSFORMER, model, work / "decoder.onnx"),
        )

    def ids(self, texts, beam, max_length, length_penalty: float) -> list[list[int]]:
        """The whole batch in one call, as served; ``beam``/``max_length``: one for every row,
        or one per row."""
        s = self.settings
        tokens = (s.eos_token_id, s.pad_token_id, s.forced_eos)
        beams = beam if isinstance(beam, list) else [beam] * len(texts)
        limits = max_length if isinstance(max_length, list) else [max_length] * len(texts)
        jobs = [
            Job(self.python.text.encode(t), b, m)
            for t, b, m in zip(texts, beams, limits, strict=True)
        ]

        def run(feeds):
            return self.session.run(["sequences"], feeds)[0]

        return generate_graph(run, jobs, tokens, length_penalty)


def _load(checkpoint: Path, work: Path):
    from transformers import MarianMTModel, MarianTokenizer

    model = MarianMTModel.from_pretrained(str(checkpoint), attn_implementation="eager").eval()
    tokenizer = MarianTokenizer.from_pretrained(str(checkpoint))
    return model, tokenizer, Graph(model, checkpoint, work)


@pytest.fixture(scope="module")
def default_model(tmp_path_factory):
    return _load(DEFAULT_CHECKPOINT, tmp_path_factory.mktemp("generate_default"))


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("generate_random")
    return _load(_random_checkpoint(tmp / "checkpoint"), tmp)


def _held_out(count: int) -> list[str]:
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [corpus.english(n) for n in split.test[:count]]


@pytest.mark.parametrize(
    ("beam", "max_length", "length_penalty"),
    [(1, 64, 1.0), (4, 64, 1.0), (4, 12, 0.6), (3, 9, 2.0), (1, 6, 1.0), (2, 3, 1.0), (4, 2, 1.0)],
)
def test_default_model_matches_hf_and_the_python_search(
    default_model, beam, max_length, length_penalty
):
    model, tokenizer, graph = default_model
    texts = _held_out(40)
    expected = hf_generate(model, tokenizer, texts, beam, max_length, length_penalty)
    assert graph.ids(texts, beam, max_length, length_penalty) == expected
    assert graph.python.ids(texts, beam, max_length, length_penalty) == expected


def _score(model, tokenizer, text: str, ids: list[int], max_length: int, penalty: float) -> float:
    """HF's beam score of ``ids`` for ``text``: the sum of the tokens' log-probabilities (a
    forced EOS counts 0, as its processor sets it) over the generated length ** penalty."""
    import torch

    start = model.config.decoder_start_token_id
    source = tokenizer([text], return_tensors="pt")
    decoder = torch.tensor([[start, *ids[:-1]]])
    with torch.no_grad():
        logits = model(**source, decoder_input_ids=decoder).logits[0]
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    total = sum(float(logprobs[i, token]) for i, token in enumerate(ids))
    if len(ids) == max_length - 1 and model.generation_config.forced_eos_token_id is not None:
        total -= float(logprobs[len(ids) - 1, ids[-1]])
    return total / len(ids) ** penalty


@pytest.mark.parametrize(
    ("beam", "max_length", "length_penalty"),
    [(1, 24, 1.0), (4, 24, 1.0), (5, 16, 0.5), (3, 20, 2.0), (2, 8, -1.0), (4, 24, 0.0)],
)
def test_random_marian_matches_hf_or_finds_a_better_hypothesis(
    random_model, beam, max_length, length_penalty
):
    """Id for id where the operator stops when HF does. Its stopping test differs: it weighs
    the best of all 2 x beam candidates, EOS ones included, where HF weighs the best running
    beam (beam_search_scorer.cc ``IsDone`` against HF's ``_check_early_stop_heuristic``), so
    it may search on after HF stops and return a hypothesis HF's own score ranks higher."""
    model, tokenizer, graph = random_model
    texts = _random_sources(24)
    expected = hf_generate(model, tokenizer, texts, beam, max_length, length_penalty)
    assert graph.python.ids(texts, beam, max_length, length_penalty) == expected
    got = graph.ids(texts, beam, max_length, length_penalty)
    differing = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
    if beam == 1:
        assert differing == []
    for i in differing:
        ours = _score(model, tokenizer, texts[i], got[i], max_length, length_penalty)
        theirs = _score(model, tokenizer, texts[i], expected[i], max_length, length_penalty)
        assert ours >= theirs - 1e-4, (i, got[i], expected[i], ours, theirs)
    assert len({len(row) for row in expected}) >= 2, "hypotheses should end at varied lengths"


def test_rows_keep_their_own_beam_and_max_length(default_model):
    """One call, rows with different beams and limits (the Loop gives each row its own): each
    row as HF gives it with its own settings."""
    model, tokenizer, graph = default_model
    texts = _held_out(8)
    beams, limits = [1, 4, 2, 4, 1, 3, 4, 2], [64, 64, 6, 7, 2, 9, 3, 64]
    expected = [
        hf_generate(model, tokenizer, [t], b, m, 1.0)[0]
        for t, b, m in zip(texts, beams, limits, strict=True)
    ]
    assert graph.ids(texts, beams, limits, 1.0) == expected


def test_the_graph_is_one_beam_search_node_in_a_loop_over_rows(default_model):
    """The search is the operator: the whole generation is one BeamSearch node, inside the
    Loop that gives it one row of the batch at a time."""
    _, _, graph = default_model
    import onnx

    path = Path(graph.session._model_path)
    nodes = onnx.load(str(path)).graph.node
    (loop,) = [n for n in nodes if n.op_type == "Loop"]
    body = [n for n in loop.attribute[0].g.node if n.op_type not in ("Constant",)]
    searches = [(n.op_type, n.domain) for n in body if n.domain == "com.microsoft"]
    assert searches == [("BeamSearch", "com.microsoft")]
