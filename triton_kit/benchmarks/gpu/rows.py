"""The rows benchmarks/results/gpu.md lacked after its first runs (issue 10).

- ``input``: ResNet-50 fed JPEG bytes (decoded by nvJPEG and resized on the GPU by the
  ``resnet50_preprocess`` code) vs decoded RGB UINT8 (resized on the GPU by the
  ``resnet50_uint8_preprocess`` code), both ensembles in front of one FP16 TorchScript.
- ``shm``: the UINT8 inputs inline vs through system vs CUDA shared memory.
- ``minilm``: all-MiniLM-L6-v2 (its shape; random weights unless the checkpoint is
  installed) built by ``python -m triton_kit.build_engines bert --engine torch`` and served by the
  ``bert`` python model (tokenizer in its stub, one BLS call per length bucket to
  ``bert_model``, the TorchScript that Triton's pytorch backend runs) on mixed lengths,
  vs the same tokenise/bucket/encode in-process; plus its two-model ensemble.

Each ``prepare_*`` writes models into the repository before the server starts; each
``*_steps`` returns guarded (label, measure(url)) pairs.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np

from triton_kit.benchmarks.gpu.families import BUCKETS, families
from triton_kit.benchmarks.gpu.load import (
    Load,
    served_load,
    served_sequential,
    spec_load,
    stats,
    timed_loop,
)
from triton_kit.benchmarks.gpu.models import Spec, resnet50_pixels, write_torch_model
from triton_kit.benchmarks.gpu.settings import Settings

PIXELS = "PIXELS"
IMAGE_SIZE = (640, 480)  # a typical photo: 0.9 MB as UINT8, ~50 kB as JPEG
MINILM = "minilm"
Step = tuple[str, Callable[[str], dict]]


# -- input: JPEG vs UINT8 ------------------------------------------------------------------


def sample_jpeg() -> bytes:
    from triton_kit.build_engines.families.sample_images import synthetic_images

    image = next(synthetic_images(1, seed=7)).resize(IMAGE_SIZE)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def sample_uint8() -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(sample_jpeg())).convert("RGB"))


def prepare_inputs(repo: Path, settings: Settings) -> None:
    """r50_px (TorchScript on pixels) behind r50_jpeg and r50_raw ensembles."""
    import torch

    from triton_kit.build_engines.repository import (
        Step as EnsembleStep,
    )
    from triton_kit.build_engines.repository import (
        Tensor,
        ensemble_config,
        python_model_config,
        python_shim,
        set_instances,
        write_model,
    )

    buckets = (1, 2, 4) if settings.smoke else BUCKETS[:7]
    max_batch = 4 if settings.smoke else 64
    spec = Spec("r50_px", {"pixel_values": ("FP32", (3, 224, 224))}, ("logits", 1000), buckets, 2)
    module = resnet50_pixels(settings).to(settings.device).eval()
    write_torch_model(repo, spec, module, max_batch, settings, 1000)
    del module
    if settings.gpu:
        torch.cuda.empty_cache()
    pixels = Tensor(PIXELS, "FP32", (3, 224, 224))
    for name, image, cls in (
        ("r50_jpeg", Tensor("IMAGE", "STRING", (1,)), "ImagePreprocessor"),
        ("r50_raw", Tensor("IMAGE_UINT8", "UINT8", (-1, -1, 3)), "RawImagePreprocessor"),
    ):
        pre = python_model_config(
            f"{name}_pre", [image], [pixels], max_batch, instances=2, dynamic_batching_delay_us=100
        )
        if settings.gpu:
            set_instances(pre, 2, "KIND_GPU")
        write_model(
            repo, pre, {"model.py": python_shim(f"triton_kit.python_models.resnet50.model.{cls}")}
        )
        steps = [
            EnsembleStep(f"{name}_pre", {image.name: image.name}, {PIXELS: "pixels"}),
            EnsembleStep("r50_px", {"pixel_values": "pixels"}, {"logits": "logits"}),
        ]
        logits = Tensor("logits", "FP32", (1000,))
        write_model(repo, ensemble_config(name, [image], [logits], max_batch, steps))


def input_loads(api_key: str = "", shm: str | None = None) -> dict[str, Load]:
    jpeg = np.array([[sample_jpeg()]], dtype=np.object_)
    return {
        "jpeg": Load("r50_jpeg", [{"IMAGE": jpeg}], "logits", 1, shm, api_key),
        "uint8_640x480": Load(
            "r50_raw", [{"IMAGE_UINT8": sample_uint8()[None]}], "logits", 1, shm, api_key
        ),
    }


def input_steps(settings: Settings) -> list[Step]:
    users = settings.concurrency(64)
    steps: list[Step] = []
    for label in input_loads():
        steps.append(
            (
                f"{label}_sequential_bs1",
                lambda url, k=label: served_sequential(url, input_loads()[k], settings),
            )
        )
        steps.append(
            (
                f"{label}_bs1_c{users}",
                lambda url, k=label: served_load(url, input_loads()[k], users, settings),
            )
        )
    return steps


# -- shared memory -------------------------------------------------------------------------


def shm_steps(settings: Settings, api_key: str) -> list[Step]:
    """The largest inputs (decoded photos; 64-image UINT8 batches) inline vs shm."""
    kinds: list[str | None] = [None, "system", "cuda"] if settings.gpu else [None, "system"]
    family = families(settings)["resnet50"]
    big_batch = family.loads[-1][0]
    steps: list[Step] = []
    for kind in kinds:
        tag = kind or "inline"
        raw_users = settings.concurrency(64)
        steps.append(
            (
                f"uint8_640x480_bs1_c{raw_users}_{tag}",
                lambda url, k=kind, c=raw_users: served_load(
                    url, input_loads(api_key, k)["uint8_640x480"], c, settings
                ),
            )
        )
        batch_users = settings.concurrency(8)
        steps.append(
            (
                f"uint8_224_bs{big_batch}_c{batch_users}_{tag}",
                lambda url, k=kind, c=batch_users: served_load(
                    url, _with_shm(spec_load(family.spec, big_batch), k, api_key), c, settings
                ),
            )
        )
    return steps


def _with_shm(load: Load, kind: str | None, api_key: str) -> Load:
    return Load(load.model, load.requests, load.output, load.output_rows, kind, api_key)


# -- MiniLM on mixed lengths, BERT through the torch engine ------------------------------


def mixed_texts(count: int, seed: int = 0, longest: int = 200) -> list[str]:
    """Sentences of 3 to ``longest`` words, mostly short (log-uniform), fixed by ``seed``."""
    rng = np.random.default_rng(seed)
    words = "the a model server batch token GPU request queue latency image text of to and in"
    vocab = words.split() + [f"w{i}" for i in range(200)]
    lengths = np.exp(rng.uniform(np.log(3), np.log(longest), count)).astype(int)
    return [" ".join(rng.choice(vocab, size=n)) for n in lengths]


def prepare_minilm(repo: Path, work: Path, settings: Settings) -> dict:
    """``python -m triton_kit.build_engines bert --engine torch`` for the MiniLM shape, into
    ``repo``."""
    from triton_kit.build_engines.cli import build_from_argv
    from triton_kit.build_engines.families import bert

    argv = [
        "bert",
        "--engine",
        "torch",
        "--name",
        MINILM,
        "--max-length",
        str(max_length(settings)),
    ]
    argv += ["--precision", "fp16" if settings.half else "fp32", "--instances", "1"]
    argv += ["--max-batch-size", "64", "--output-repository", str(repo), "--work-dir", str(work)]
    checkpoint = bert.default_checkpoint()
    if checkpoint is None:  # the lent GPU has no MiniLM weights: its shape, random weights
        tokenizer = settings.tokenizer or Path("tokenizer.json")
        argv += ["--shape", "minilm-l6", "--checkpoint", str(Path(tokenizer).parent)]
    build_from_argv(argv)
    weights = "all-MiniLM-L6-v2 weights" if checkpoint else "MiniLM-L6 shape, RANDOM weights"
    return {"source": weights}


def max_length(settings: Settings) -> int:
    """all-MiniLM-L6-v2's 256 tokens; 32 in the CPU smoke run."""
    return 32 if settings.smoke else 256


def minilm_texts(settings: Settings) -> list[str]:
    return mixed_texts(512, longest=20 if settings.smoke else 200)


def minilm_batches(settings: Settings) -> tuple[int, ...]:
    return (1, 8) if settings.smoke else (1, 64)


def eager_torchscript(path: Path, device: str):
    """feeds -> embeddings through the TorchScript file that ``bert_model`` serves, eagerly,
    one CPU thread (what Triton's pytorch backend runs, without the serving path)."""
    import torch

    if device == "cpu":
        torch.set_num_threads(1)
    module = torch.jit.load(str(path), map_location=device).eval()
    names = ("input_ids", "attention_mask")

    def encode(feeds) -> np.ndarray:
        with torch.inference_mode():
            inputs = [torch.from_numpy(np.ascontiguousarray(feeds[n])).to(device) for n in names]
            return module(*inputs).float().cpu().numpy()

    return encode


def minilm_in_process(repo: Path, settings: Settings) -> dict:
    """What one ``bert`` execute does, without Triton: tokenise, bucket, encode per bucket."""
    from triton_kit.python_models.bert.text import (
        DEFAULT_BUCKETS,
        bucket_lengths,
        group_by_bucket,
        load_tokenizer,
        pad_rows,
        token_ids,
    )
    from triton_kit.python_models.common.sibling import sibling_device

    version = repo / MINILM / "1"
    device = sibling_device(version, f"{MINILM}_model")
    encoder = eager_torchscript(repo / f"{MINILM}_model" / "1" / "model.pt", device)
    tokenizer = load_tokenizer(version / "tokenizer.json", max_length(settings))
    buckets = bucket_lengths(DEFAULT_BUCKETS, max_length(settings))
    texts = minilm_texts(settings)
    results = {}
    for batch in minilm_batches(settings):
        position = [0]

        def call(batch=batch, position=position):
            start = position[0] % len(texts)
            position[0] += batch
            chosen = [texts[(start + i) % len(texts)] for i in range(batch)]
            rows = token_ids(tokenizer, chosen)
            for bucket, indices in group_by_bucket(rows, buckets).items():
                encoder(pad_rows([rows[i] for i in indices], bucket))

        lat = timed_loop(call, settings.seconds)
        results[f"eager_bs{batch}"] = {**stats(lat), "items_per_s": batch * len(lat) / sum(lat)}
    return results


def minilm_steps(settings: Settings) -> list[Step]:
    texts = minilm_texts(settings)
    requests = [{"TEXT": np.array([[t.encode()]], dtype=np.object_)} for t in texts]
    users = settings.concurrency(64)
    steps: list[Step] = []
    for model in (MINILM, f"{MINILM}_ensemble"):
        load = Load(model, requests, "EMBEDDING", 1)
        steps.append(
            (f"{model}_sequential_bs1", lambda url, x=load: served_sequential(url, x, settings))
        )
        steps.append(
            (f"{model}_bs1_c{users}", lambda url, x=load: served_load(url, x, users, settings))
        )
    return steps
