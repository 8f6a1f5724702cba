"""Write docker/requirements-*.txt from pyproject.toml's extras (``make docker-requirements``).

pyproject.toml is the one list of the kit's dependencies. Each image installs one extra of
it (with the SDK's own dependencies where the image runs the SDK), flattened: the extras it
includes (``triton-kit[stub]``) are followed, and a package named twice is written once with
every bound. ``--check`` writes nothing and fails, naming the files, where a checked-in file
differs from what would be written (tests/unit/test_docker_requirements.py runs it).

A developer tool, run from a checkout with Python 3.11+ (tomllib); nothing imports it.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "triton-kit"


@dataclass(frozen=True)
class RequirementsFile:
    """A docker/requirements-*.txt: the extra it is written from, whether the image also
    needs the SDK's own dependencies ([project] dependencies), and why it exists."""

    path: str
    extra: str
    sdk: bool
    why: str


FILES = (
    RequirementsFile(
        "docker/requirements-triton.txt",
        "stub",
        sdk=False,
        why="Python packages the python-backend models (triton_kit/python_models/) import, "
        "installed into the official Triton 24.10 image (docker/triton.Dockerfile), whose "
        "python backend runs Python 3.10.",
    ),
    RequirementsFile(
        "docker/requirements-build.txt",
        "export",
        sdk=True,
        why="What `python -m triton_kit.build_engines` needs inside the build-engines image "
        "(docker/build-engines.Dockerfile; Triton 24.10, Python 3.10): no embedded server "
        "(the image has its own tritonserver), no load test, no plots. The TensorRT Python "
        "package is NOT listed here: the Dockerfile installs the version that matches the "
        "image's own TensorRT library and checks that they agree.",
    ),
    RequirementsFile(
        "docker/requirements-loadtest.txt",
        "locust",
        sdk=True,
        why="The Locust image (docker/locust.Dockerfile): the load-test users "
        "(triton_kit/loadtest/) and the client SDK (triton_kit/client/) they call.",
    ),
)

_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?"
    r"\s*(?P<spec>[^;]*?)\s*(?:;\s*(?P<marker>.*))?$"
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Requirement:
    name: str
    extras: list[str]
    bounds: list[str]
    marker: str

    @classmethod
    def parse(cls, text: str) -> Requirement:
        match = _REQUIREMENT.match(text)
        if not match:
            raise ValueError(f"not a requirement: {text!r}")
        extras = [e.strip() for e in (match["extras"] or "").split(",") if e.strip()]
        bounds = [b.strip() for b in match["spec"].split(",") if b.strip()]
        return cls(match["name"], extras, bounds, (match["marker"] or "").strip())

    def merge(self, other: Requirement) -> None:
        """The same package named again: every extra and every bound, once."""
        if other.marker != self.marker:
            raise ValueError(
                f"{self.name} is named with two markers: {self.marker!r}, {other.marker!r}"
            )
        self.extras += [e for e in other.extras if e not in self.extras]
        self.bounds += [b for b in other.bounds if b not in self.bounds]

    def __str__(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        bounds = ",".join(sorted(self.bounds, key=_bound_order))
        marker = f"; {self.marker}" if self.marker else ""
        return f"{self.name}{extras}{bounds}{marker}"


def _bound_order(bound: str) -> tuple[int, str]:
    """Lower bounds first (``>=1.26,<2``), as the files were written by hand."""
    return (0 if bound.startswith((">", "=", "~")) else 1, bound)


def flatten(project: dict, extra: str, *, sdk: bool) -> list[Requirement]:
    """The requirements of ``extra`` (and of the extras it includes, where first named),
    after the SDK's own where ``sdk``; a package named twice is merged into its first place."""
    extras = project.get("optional-dependencies", {})
    merged: dict[str, Requirement] = {}
    seen: set[str] = set()

    def add(lines: list[str]) -> None:
        for line in lines:
            requirement = Requirement.parse(line)
            if canonical(requirement.name) == DISTRIBUTION:
                for included in requirement.extras:
                    visit(included)
                continue
            key = canonical(requirement.name)
            if key in merged:
                merged[key].merge(requirement)
            else:
                merged[key] = requirement

    def visit(name: str) -> None:
        if name in seen:
            return
        if name not in extras:
            raise KeyError(f"pyproject.toml has no extra {name!r}")
        seen.add(name)
        add(extras[name])

    if sdk:
        add(project.get("dependencies", []))
    visit(extra)
    return list(merged.values())


def render(file: RequirementsFile, pyproject: dict) -> str:
    what = f"[{file.extra}]" + (" and the SDK's own dependencies" if file.sdk else "")
    made = (
        f"Written by `make docker-requirements` (scripts/docker_requirements.py) from "
        f"pyproject.toml's extra {what}; edit pyproject.toml, where each line says why it "
        "is there, and run it again: tests/unit/test_docker_requirements.py fails where "
        "this file differs."
    )
    header = [file.why, "", made]
    body = [str(r) for r in flatten(pyproject["project"], file.extra, sdk=file.sdk)]
    lines = [
        line
        for paragraph in header
        for line in textwrap.wrap(paragraph, 98, break_on_hyphens=False) or [""]
    ]
    comments = [f"# {line}".rstrip() for line in lines]
    return "\n".join([*comments, *body]) + "\n"


def stale(root: Path) -> dict[str, tuple[str, str]]:
    """Files whose checked-in text differs from what would be written: path -> (have, want)."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    out = {}
    for file in FILES:
        path = root / file.path
        have = path.read_text() if path.exists() else ""
        want = render(file, pyproject)
        if have != want:
            out[file.path] = (have, want)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/docker_requirements.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="write nothing; fail where stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    differing = stale(args.root)
    if args.check:
        for path, (have, want) in differing.items():
            diff = difflib.unified_diff(
                have.splitlines(),
                want.splitlines(),
                f"{path} (checked in)",
                f"{path} (from pyproject.toml)",
                lineterm="",
            )
            print("\n".join(diff), file=sys.stderr)
        if differing:
            print(f"stale: {', '.join(differing)}; run `make docker-requirements`", file=sys.stderr)
            return 1
        return 0
    for path, (_, want) in differing.items():
        (args.root / path).write_text(want)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
