"""``python -m triton_kit.loadtest tune`` options, parsed once into :class:`TuneOptions`."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from triton_kit.loadtest.tune.errors import TuneError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
# The models a user calls or that carry the compute, one per family; ensembles are
# refused (Model Analyzer profiles them only in quick search mode).
DEFAULT_MODELS = ("resnet50_model", "bert", "nmt")
DEFAULT_MEASUREMENT_MS = 1500
# The machine is shared: perf_analyzer's default 10% would retry windows for minutes.
DEFAULT_STABILITY_PERCENT = 50
DEFAULT_VENV = PROJECT_ROOT / "build" / "model-analyzer-venv"
MODEL_ANALYZER_SPEC = "triton-model-analyzer==1.58.0"
# The kit's perf_analyzer convention (benchmarks.harness.perf_analyzer, scripts/gpu/bench.sh).
PERF_ANALYZER_ENV = "PERF_ANALYZER"

DESCRIPTION = """\
Find each model's best Triton config under a latency SLO with Triton Model Analyzer, run
against the kit's embedded tritonserver on this machine. For each model it profiles the
config as built (today's hand-chosen one) and variants over instance count and dynamic
batching queue delay (and, if you ask, max batch size and preferred batch sizes) at a few
client concurrencies, and chooses the config with the highest throughput whose p99 latency
stays within --slo-p99-ms (and whose throughput reaches --min-throughput).

Writes reports/tune/<UTC time>/: summary.md and index.html (chosen config, runner-up, why
each other config lost, throughput-vs-p99 plot per model), and per model Model Analyzer's
own CSV, summary and detailed reports. --apply then writes the chosen fields into
model_repository/ (diff first; nothing else changes) and records them in tuned.json beside
the model, so `python -m triton_kit.build_engines` keeps them on a rebuild. --apply writes
nothing until every model is profiled, its chosen config parses and the report exists, and
then applies all models or none: a failure puts back every file it had written.

Model Analyzer lives in its own venv (build/model-analyzer-venv, created on first use from
PyPI) unless --model-analyzer names one already installed (a machine with no package index:
scripts/gpu/tune.sh); perf_analyzer is $PERF_ANALYZER, else the one beside this Python
(installed by scripts/install-perf-analyzer.sh if missing). A run is resumable: run
the same command again with --out pointing at the interrupted run's folder.
Exit codes: 0 ok, 1 a model has no config within the SLO, 2 bad input or a failed run."""


@dataclass(frozen=True)
class TuneOptions:
    """What to tune and how; ``None`` ranges are derived from each model's config."""

    slo_p99_ms: float
    models: tuple[str, ...] = DEFAULT_MODELS
    min_throughput: float = 0.0
    model_repository: Path = PROJECT_ROOT / "model_repository"
    out: Path | None = None
    instances: tuple[int, ...] | None = None
    queue_delays_us: tuple[int, ...] | None = None
    max_batch_sizes: tuple[int, ...] | None = None
    preferred_batch_sizes: tuple[int, ...] | None = None
    concurrency: tuple[int, ...] | None = None
    measurement_ms: int = DEFAULT_MEASUREMENT_MS
    stability_percent: int = DEFAULT_STABILITY_PERCENT
    apply: bool = False
    venv: Path = DEFAULT_VENV
    perf_analyzer: Path = Path(sys.executable).parent / "perf_analyzer"
    # An installed ``model-analyzer`` executable; None: the venv's, installed on first use.
    model_analyzer: Path | None = None
    # perf_analyzer's ``--shape NAME:DIMS`` for inputs with a variable dimension.
    shapes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.slo_p99_ms > 0:
            raise TuneError(f"--slo-p99-ms must be above 0, not {self.slo_p99_ms:g}")
        if self.min_throughput < 0:
            raise TuneError(f"--min-throughput must be 0 or more, not {self.min_throughput:g}")
        if not self.models:
            raise TuneError("name at least one model")
        if self.measurement_ms < 100:
            raise TuneError(f"--measurement-ms must be at least 100, not {self.measurement_ms}")
        ranges = {
            "--instances": self.instances,
            "--max-batch-sizes": self.max_batch_sizes,
            "--preferred-batch-sizes": self.preferred_batch_sizes,
            "--concurrency": self.concurrency,
        }
        for flag, values in ranges.items():
            if values is not None and (not values or min(values) < 1):
                raise TuneError(f"{flag}: give whole numbers of 1 or more, not {values}")
        if self.queue_delays_us is not None and (
            not self.queue_delays_us or min(self.queue_delays_us) < 0
        ):
            raise TuneError(f"--queue-delays-us: give 0 or more, not {self.queue_delays_us}")
        for shape in self.shapes:
            parse_shape(shape)


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME:DIMS`` (perf_analyzer's ``--shape``, e.g. ``input_ids:64``) as a name and dims."""
    name, _, dims = text.rpartition(":")
    try:
        values = tuple(int(d) for d in dims.split(","))
    except ValueError:
        values = ()
    if not name or not values or min(values) < 1:
        raise TuneError(
            f"--shape: give NAME:DIMS with dims of 1 or more (e.g. input_ids:64), not {text!r}"
        )
    return name, values


def default_perf_analyzer() -> Path:
    """$PERF_ANALYZER where set (scripts/gpu/bench.sh sets it), else beside this Python."""
    named = os.environ.get(PERF_ANALYZER_ENV)
    return Path(named) if named else Path(sys.executable).parent / "perf_analyzer"


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m triton_kit.loadtest tune",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help=f"Models in the repository to tune (default: {' '.join(DEFAULT_MODELS)}).",
    )
    p.add_argument(
        "--slo-p99-ms", type=float, required=True, help="Latency budget: p99 in ms (required)."
    )
    p.add_argument(
        "--min-throughput",
        type=float,
        default=0.0,
        help="Also require this many inferences/s (default 0: none); passed to Model "
        "Analyzer as its perf_throughput constraint and applied by the kit's own choice.",
    )
    p.add_argument(
        "--apply",
        action="store_true",
        help="After the report, write every model's chosen fields (diff first; all or none).",
    )
    p.add_argument("--out", type=Path, help="Report folder (default reports/tune/<UTC time>); "
                   "an interrupted run's folder resumes it.")  # fmt: skip
    p.add_argument(
        "--model-repository",
        type=Path,
        default=TuneOptions.model_repository,
        help="Repository to tune and apply to (default model_repository/).",
    )
    ranges = p.add_argument_group(
        "search ranges (comma-separated; derived from each model's config and this machine "
        "unless given)"
    )
    ranges.add_argument(
        "--instances", type=_ints, help="Instance counts (default 1..cores, at most 4)."
    )
    ranges.add_argument(
        "--queue-delays-us",
        type=_ints,
        help="Dynamic batcher max queue delays in µs (default 0,2000 and the current one).",
    )
    ranges.add_argument(
        "--max-batch-sizes", type=_ints, help="max_batch_size values (default: as built)."
    )
    ranges.add_argument(
        "--preferred-batch-sizes",
        type=_ints,
        help="Preferred batch sizes, each tried alone (default: not searched).",
    )
    ranges.add_argument(
        "--concurrency", type=_ints, help="Client concurrencies (default 1, cores, 4 x cores)."
    )
    ranges.add_argument(
        "--measurement-ms",
        type=int,
        default=DEFAULT_MEASUREMENT_MS,
        help=f"perf_analyzer's window per measurement (default {DEFAULT_MEASUREMENT_MS}).",
    )
    ranges.add_argument(
        "--stability-percent",
        type=int,
        default=DEFAULT_STABILITY_PERCENT,
        help="perf_analyzer's stability threshold across windows "
        f"(default {DEFAULT_STABILITY_PERCENT}: the machine may be shared).",
    )
    ranges.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME:DIMS",
        help="An input's shape where its config has a variable dimension (perf_analyzer's "
        "--shape; repeat per input): e.g. bert_model's --shape input_ids:64 --shape "
        "attention_mask:64, sent as ones (token ids and a full mask).",
    )
    tools = p.add_argument_group("tools")
    tools.add_argument(
        "--model-analyzer",
        type=Path,
        help="An installed model-analyzer executable to run (default: "
        f"{DEFAULT_VENV.relative_to(PROJECT_ROOT)}/bin/model-analyzer, installed from PyPI "
        "on first use).",
    )
    tools.add_argument(
        "--perf-analyzer",
        type=Path,
        help=f"perf_analyzer to measure with (default ${PERF_ANALYZER_ENV}, else the one "
        "beside this Python, installed by scripts/install-perf-analyzer.sh if missing).",
    )
    return p


def parse(argv: list[str]) -> TuneOptions:
    """Parse once; a bad value exits with status 2 and the message."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return TuneOptions(
            slo_p99_ms=args.slo_p99_ms,
            models=tuple(args.models) or DEFAULT_MODELS,
            min_throughput=args.min_throughput,
            model_repository=args.model_repository,
            out=args.out,
            instances=args.instances,
            queue_delays_us=args.queue_delays_us,
            max_batch_sizes=args.max_batch_sizes,
            preferred_batch_sizes=args.preferred_batch_sizes,
            concurrency=args.concurrency,
            measurement_ms=args.measurement_ms,
            stability_percent=args.stability_percent,
            apply=args.apply,
            perf_analyzer=args.perf_analyzer or default_perf_analyzer(),
            model_analyzer=args.model_analyzer,
            shapes=tuple(args.shape),
        )
    except TuneError as exc:
        parser.error(str(exc))
