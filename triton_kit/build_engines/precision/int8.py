"""INT8 as Q/DQ nodes from ONNX Runtime's static quantiser, in the form TensorRT expects.

TensorRT's explicit quantisation wants symmetric INT8 (zero point 0) for
activations and weights, per-channel weight scales, and Q/DQ on the inputs of
the compute-heavy ops; ``quantize_static`` in QDQ format writes exactly that.
Weights use 7 bits (``reduce_range``, |w| <= 64) so that ONNX Runtime on an x86 CPU
without VNNI (AVX2 or AVX-512 alone) serves the same graph correctly: from ONNX Runtime
1.21 on (1.20.1 did not), its INT8 kernel there (VPMADDUBSW) sums two u8 x s8 products
into a saturating int16, and 2 * 255 * 127 overflows it (the tiny MLP of
tests/integration/server/test_precision_served.py fell to row cosine 0.92 to FP32, against
0.998 with VNNI); 2 * 255 * 64 does not.
Calibration ranges are cached as JSON under the work dir, keyed by model hash,
calibration-data digest, method and sample count, so a rebuild skips the
calibration pass but never reuses ranges measured on other data.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

Feeds = Mapping[str, np.ndarray]

METHODS = ("minmax", "entropy", "percentile")
# Ops whose inputs get Q/DQ: TensorRT fuses these into INT8 kernels; the rest stays FP32.
QUANTIZED_OPS: tuple[str, ...] = ("Conv", "ConvTranspose", "MatMul", "Gemm")

# Nodes kept in float per family (regexes on ONNX node names), found by sensitivity runs.
# BERT: the feed-forward MatMuls read LayerNorm/GELU outputs with a few huge outlier
# channels; per-tensor symmetric INT8 (what TensorRT runs) cannot cover them. On
# all-MiniLM-L6-v2, quantising them gives embedding cosine 0.85 to FP32; keeping them float
# gives 0.995 (attention projections and attention matmuls stay INT8).
KEEP_FLOAT: dict[str, tuple[str, ...]] = {
    "bert": (r"/layer\.\d+/intermediate/dense/MatMul$", r"/layer\.\d+/output/dense/MatMul$"),
}


@dataclass(frozen=True)
class CalibrationSettings:
    """How ranges are measured: method, number of samples, percentile (percentile method)."""

    method: str = "minmax"
    size: int = 32
    percentile: float = 99.999

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"calibration method {self.method!r} is not one of {METHODS}")
        if self.size < 1:
            raise ValueError("calibration size must be at least 1")


@dataclass(frozen=True)
class Int8Result:
    path: Path
    cache_path: Path
    cache_hit: bool
    samples: int
    kept_float: tuple[str, ...] = ()


class FeedsReader:
    """An onnxruntime ``CalibrationDataReader`` over the first ``limit`` feeds of a source."""

    def __init__(self, feeds: Iterable[Feeds], input_names: Iterable[str], limit: int) -> None:
        self._names = set(input_names)
        self._feeds = itertools.islice(iter(feeds), limit)
        self.count = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        feed = next(self._feeds, None)
        if feed is None:
            return None
        self.count += 1
        return {name: np.asarray(value) for name, value in feed.items() if name in self._names}

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        while (feed := self.get_next()) is not None:
            yield feed


def fingerprint(feeds: Iterable[Feeds], limit: int) -> str:
    """A digest of the first ``limit`` calibration feeds (names, dtypes, shapes, bytes)."""
    digest = hashlib.sha256()
    for feed in itertools.islice(iter(feeds), limit):
        for name in sorted(feed):
            array = np.ascontiguousarray(feed[name])
            digest.update(f"{name}|{array.dtype.str}|{array.shape}".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def cache_path_for(
    cache_dir: Path, onnx_sha256: str, settings: CalibrationSettings, data_digest: str = ""
) -> Path:
    """One cache file per (model content, calibration data, method, samples, percentile)."""
    suffix = f"-p{settings.percentile:g}" if settings.method == "percentile" else ""
    data = f"-d{data_digest[:12]}" if data_digest else ""
    name = f"calibration-{onnx_sha256[:16]}{data}-{settings.method}{suffix}-n{settings.size}.json"
    return cache_dir / name


def to_int8(
    src: Path,
    dst: Path,
    calibration: Callable[[], Iterable[Feeds]] | None,
    settings: CalibrationSettings,
    cache_path: Path,
    keep_float: Sequence[str] = (),
) -> Int8Result:
    """Quantise ``src`` to a QDQ model at ``dst``, calibrating unless ``cache_path`` exists.

    Nodes whose names match a ``keep_float`` regex get no Q/DQ (they stay FP32)."""
    cache_hit = cache_path.is_file()
    if not cache_hit and calibration is None:
        raise ValueError(f"INT8 needs calibration data: no source given and no cache {cache_path}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    samples = settings.size
    with _quiet_root_logger():
        if not cache_hit:
            samples = calibrate(src, calibration(), settings, cache_path)  # type: ignore[misc]
        kept = matching_nodes(src, keep_float)
        _quantize(src, dst, settings, cache_path, kept)
    return Int8Result(dst, cache_path, cache_hit, samples, tuple(kept))


def matching_nodes(path: Path, patterns: Sequence[str]) -> list[str]:
    """Names of the nodes of ``path`` that match any of ``patterns``."""
    if not patterns:
        return []
    import onnx

    compiled = [re.compile(p) for p in patterns]
    model = onnx.load(str(path), load_external_data=False)
    return [n.name for n in model.graph.node if any(c.search(n.name) for c in compiled)]


def calibrate(
    src: Path, feeds: Iterable[Feeds], settings: CalibrationSettings, cache_path: Path
) -> int:
    """Measure activation ranges feed by feed and save them to ``cache_path``.

    One ``collect_data`` call per run of equally shaped feeds: the histogram calibrators
    (entropy, percentile) stack every tensor of one call, which fails when feeds differ in
    shape (BERT buckets, NMT cache lengths); across calls they merge histograms.
    """
    import tempfile

    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    reader = FeedsReader(feeds, _input_names(src), settings.size)
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="calibrate-") as tmp:
        calibrator = create_calibrator(
            src,
            list(QUANTIZED_OPS),
            augmented_model_path=str(Path(tmp) / "augmented.onnx"),
            calibrate_method=_method(settings.method),
            extra_options=_calibrator_options(settings),
        )
        for group in _same_shape_runs(reader):
            calibrator.collect_data(FeedsReader(group, group[0], len(group)))
        if reader.count == 0:
            raise ValueError("the calibration source yielded no samples")
        save_tensors_data(calibrator.compute_data(), cache_path)
    return reader.count


def _same_shape_runs(feeds: Iterable[Feeds]) -> Iterator[list[Feeds]]:
    def shapes(feed: Feeds) -> tuple:
        return tuple((name, np.shape(value)) for name, value in sorted(feed.items()))

    for _, run in itertools.groupby(feeds, key=shapes):
        yield list(run)


def _quantize(
    src: Path, dst: Path, settings: CalibrationSettings, cache_path: Path, exclude: list[str]
) -> None:
    """Q/DQ model from cached ranges (``quantize_static`` loads them instead of calibrating)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    quantize_static(
        str(src),
        str(dst),
        calibration_data_reader=None,
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=list(QUANTIZED_OPS),
        per_channel=True,
        reduce_range=True,  # 7-bit weights: no int16 saturation on CPUs without VNNI
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=_method(settings.method),
        extra_options=_extra_options(),
        calibration_cache_path=str(cache_path),
        nodes_to_exclude=exclude,
    )


@contextlib.contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """quantize_static logs advice to run ORT's graph optimiser first; we do not on purpose
    (its fused com.microsoft ops would not parse in TensorRT), so the advice is noise."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _method(name: str):
    from onnxruntime.quantization import CalibrationMethod

    return {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }[name]


def _extra_options() -> dict[str, object]:
    return {
        "ActivationSymmetric": True,  # zero point 0, as TensorRT requires
        "WeightSymmetric": True,
        "QuantizeBias": False,  # TensorRT keeps biases in float and fuses them into the kernel
    }


def _calibrator_options(settings: CalibrationSettings) -> dict[str, object]:
    # Ranges as measured; the quantiser makes them symmetric (ActivationSymmetric).
    options: dict[str, object] = {}
    if settings.method == "percentile":
        options["percentile"] = settings.percentile
    return options


def _input_names(path: Path) -> list[str]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]
