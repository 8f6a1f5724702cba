"""The options of one pipelines run, parsed once (defaults written only here)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

# Most important first: a run cut short keeps the models that matter most (issue 30's goal
# is on the JPEG ensemble and the text model).
MODELS = ("resnet50", "bert", "resnet50_uint8", "nmt")
# One-item requests at these concurrencies: a lone client, then a saturating load.
LEVELS = {"resnet50": (1, 64, 256), "bert": (1, 64), "resnet50_uint8": (1, 256), "nmt": (1, 32)}
SMOKE_LEVELS = (1, 2)
# Served / in-process throughput the issue asks for (the other models are measured, no goal).
GOALS = {"resnet50": 0.8, "bert": 0.8}
# The build family each served model comes from (resnet50_uint8 is in resnet50's build).
FAMILIES = {"resnet50": "resnet50", "resnet50_uint8": "resnet50", "bert": "bert", "nmt": "nmt"}


@dataclass(frozen=True)
class Options:
    out: Path
    models: tuple[str, ...] = MODELS
    seconds: float = 2.0  # a perf_analyzer window; an in-process point's length
    budget_s: float = 300.0  # no step starts after this many seconds of the run
    smoke: bool = False  # CPU, a tiny ResNet, short texts: checks the code path
    tokenizer: Path | None = None  # tokenizer.json for the BERT shape (else the default's)
    sdk: bool = True
    argv: tuple[str, ...] = ()

    @property
    def families(self) -> tuple[str, ...]:
        """The builds the chosen models need, in the models' order."""
        return tuple(dict.fromkeys(FAMILIES[m] for m in self.models))

    def levels(self, model: str) -> tuple[int, ...]:
        return SMOKE_LEVELS if self.smoke else LEVELS[model]

    @property
    def stability(self) -> int:
        """perf_analyzer's bound (%) on the spread between windows; the smoke run takes its
        windows as they come (shared CPU cores: the code is checked, not the numbers)."""
        return 1000 if self.smoke else 20

    @property
    def command(self) -> str:
        return " ".join(["python -m triton_kit.benchmarks.gpu.pipelines", *self.argv])


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.gpu.pipelines",
        description="What users call, end to end: the kit's built repository served through "
        "perf_analyzer and the SDK, against the same pipeline in one process (issue 30 item 4).",
    )
    parser.add_argument("--out", type=Path, required=True, help="pipelines.json/.md go here")
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help="comma-separated, measured in this order (default %(default)s); leaving nmt "
        "out skips its build",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        help="perf_analyzer window and in-process point (default 2; --smoke 1)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=Options.budget_s,
        help="no step starts after this many seconds; the rest are recorded as skipped "
        "(default %(default)s: the lent GPU's 10-minute call less its setup)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CPU, a tiny ResNet checkpoint, short texts, concurrency 1 and 2: runs every "
        "step to catch mistakes before the GPU does (numbers meaningless)",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="tokenizer.json for the MiniLM-shaped BERT where all-MiniLM-L6-v2 is not "
        "installed (scripts/gpu/prepare.sh carries one)",
    )
    parser.add_argument("--no-sdk", action="store_true", help="skip the SDK (client) pass")
    args = parser.parse_args(argv)
    models = tuple(m for m in args.models.split(",") if m)
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown {unknown}; choose from {list(MODELS)}")
    seconds = args.seconds or (1.0 if args.smoke else 2.0)
    given = tuple(sys.argv[1:] if argv is None else argv)
    return Options(
        out=args.out,
        models=models,
        seconds=seconds,
        budget_s=args.budget_s,
        smoke=args.smoke,
        tokenizer=args.tokenizer,
        sdk=not args.no_sdk,
        argv=given,
    )
