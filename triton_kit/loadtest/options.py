"""Command-line options the locustfile adds to Locust's own (``locust -f ... --help``).

Locust parses them on master and workers alike and shows them in the web UI (under
"Custom parameters"), so the same knobs work headless, in the dashboard and in the compose
deployment. Locust 2.x answers ``--help`` before it imports the locustfile, so they are not
in ``locust --help``; ``python -m triton_kit.loadtest options`` lists them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from triton_kit.loadtest.reports import stability

DEFAULT_STEPS = "1,2,4,8"
# Model family -> Locust user class (named here so the runner need not import Locust).
GRPC_TRANSPORTS = ("sidecar", "sidecar-native", "sidecar-python", "gevent")
USER_CLASS_NAMES = {"resnet50": "ResNet50User", "bert": "BertUser", "nmt": "NmtUser"}


# Shown in the web UI's form; list-valued and internal options stay off it (the UI would
# turn a list into characters).
NOT_IN_WEB_UI = {"model_name", "raw_out", "prometheus_port", "prometheus_host"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Registered from an ``init_command_line_parser`` listener."""
    group = parser.add_argument_group("Triton kit")
    _add_to(group)
    # A group's add_argument bypasses Locust's, which marks options for the web UI.
    for action in group._group_actions:
        action.include_in_web_ui = action.dest not in NOT_IN_WEB_UI  # type: ignore[attr-defined]
        action.is_secret = False  # type: ignore[attr-defined]
        action.is_required = False  # type: ignore[attr-defined]
        action.is_multiple = False  # type: ignore[attr-defined]


def _add_to(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--weights",
        default="",
        help="User and task weights, e.g. 'resnet50=2,bert=1,nmt.beam=0,resnet50.large=1'. "
        "A bare family sets its user class weight (>= 1); family.task sets a task weight "
        "(0 disables the task). Tasks: resnet50.small/large, bert.sentence/numbers, "
        "nmt.greedy/beam.",
    )
    group.add_argument(
        "--model-name",
        action="append",
        default=[],
        metavar="FAMILY=MODEL",
        help="Call another Triton model with a family's contract, e.g. bert=my_bert "
        "(repeatable). Default: the family name.",
    )
    group.add_argument("--request-timeout", type=float, default=60.0, help="Seconds per call.")
    group.add_argument(
        "--grpc-transport",
        choices=GRPC_TRANSPORTS,
        default="sidecar",
        help="How gRPC users reach Triton: 'sidecar' (default), one gRPC process per "
        "Locust process, fed over a socket: the native one (scripts/build-native-sidecar.sh) "
        "where built, else the Python one; 'sidecar-native' or 'sidecar-python' force one; "
        "'gevent', gRPC in the Locust process through grpc's init_gevent (slowest: a native "
        "thread per call).",
    )
    group.add_argument("--beam-size", type=int, default=4, help="Beam width of nmt.beam.")
    group.add_argument(
        "--max-length", type=int, default=64, help="MAX_LENGTH (tokens) sent with NMT calls."
    )
    group.add_argument("--corpus-seed", type=int, default=0, help="Seed of the payload corpora.")
    group.add_argument(
        "--steps",
        default=DEFAULT_STEPS,
        help="Stepped shape only: users per unit of user weight at each step.",
    )
    group.add_argument(
        "--step-time", type=float, default=12.0, help="Stepped shape only: seconds per step."
    )
    group.add_argument(
        "--settle-time",
        type=float,
        default=4.0,
        help="Stepped shape only: seconds at the start of each step left out of the summary.",
    )
    group.add_argument(
        "--stability-window",
        type=float,
        default=stability.DEFAULT_WINDOW_S,
        help="Stepped shape only: seconds per stability window (0: off). When on, a step "
        "ends once throughput and p99 agree over --stability-windows consecutive windows "
        "(perf_analyzer's rule), and --step-time is the most a step may take.",
    )
    group.add_argument(
        "--stability-tolerance",
        type=float,
        default=stability.DEFAULT_TOLERANCE,
        help="Stepped shape only: largest deviation from the windows' mean, as a fraction "
        f"(default {stability.DEFAULT_TOLERANCE:g}).",
    )
    group.add_argument(
        "--stability-windows",
        type=int,
        default=stability.DEFAULT_WINDOWS,
        help=f"Stepped shape only: windows that must agree (default {stability.DEFAULT_WINDOWS}).",
    )
    group.add_argument(
        "--min-samples",
        type=int,
        default=stability.DEFAULT_MIN_SAMPLES,
        help="Stepped shape only: successful requests each window needs per model "
        f"(default {stability.DEFAULT_MIN_SAMPLES}).",
    )
    group.add_argument(
        "--prometheus-port",
        type=int,
        default=0,
        help="Serve Locust's client-side request rates and latency percentiles on "
        "http://HOST:PORT/metrics for Prometheus, from the master (default 0: off).",
    )
    group.add_argument(
        "--prometheus-host",
        default="0.0.0.0",
        help="Address the --prometheus-port endpoint binds to (default 0.0.0.0).",
    )
    group.add_argument(
        "--raw-out",
        default="",
        help="Write every request's timing and Triton statistics per step to this .npz "
        "(used by `python -m triton_kit.loadtest run`).",
    )


@dataclass(frozen=True)
class Weights:
    users: dict[str, int]
    tasks: dict[tuple[str, str], int]

    @classmethod
    def parse(cls, text: str) -> Weights:
        users: dict[str, int] = {}
        tasks: dict[tuple[str, str], int] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not value.strip().isdigit():
                raise ValueError(f"weight {item!r} is not NAME=INTEGER")
            family, dot, task = key.strip().partition(".")
            if dot:
                tasks[(family, task)] = int(value)
            elif int(value) < 1:
                raise ValueError(f"user weight {item!r} must be >= 1; leave the user out instead")
            else:
                users[family] = int(value)
        return cls(users, tasks)


def parse_pairs(items: list[str]) -> dict[str, str]:
    """['bert=identity'] -> {'bert': 'identity'}."""
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{item!r} is not FAMILY=MODEL")
        pairs[key.strip()] = value.strip()
    return pairs


def parse_steps(text: str) -> list[int]:
    steps = [int(part) for part in text.split(",") if part.strip()]
    if not steps or any(step < 1 for step in steps):
        raise ValueError(f"--steps {text!r}: give positive integers, e.g. 1,2,4,8")
    return steps


def stability_rule(options: Any) -> stability.StabilityRule:
    """The stability rule from parsed Locust options (defaults where absent)."""
    return stability.StabilityRule(
        window_s=float(getattr(options, "stability_window", stability.DEFAULT_WINDOW_S)),
        tolerance=float(getattr(options, "stability_tolerance", stability.DEFAULT_TOLERANCE)),
        windows=int(getattr(options, "stability_windows", stability.DEFAULT_WINDOWS)),
        min_samples=int(getattr(options, "min_samples", stability.DEFAULT_MIN_SAMPLES)),
    )
