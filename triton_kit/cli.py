"""``triton-kit``: one console command for the kit's jobs.

Each subcommand runs an existing ``python -m`` entry point with the arguments it is given,
so options are defined once, in that entry point's parser, and ``triton-kit SUB --help`` is
that parser's help, under the name typed (``usage: triton-kit SUB``, not the entry point's
``python -m ...``; its error messages too). Nothing heavy is imported here: ``pip install
triton-kit`` is the SDK alone, where ``triton-kit --help`` must still work and a subcommand
whose extra is not installed must say which one to install instead of failing on an import
deep inside.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import re
import runpy
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DISTRIBUTION = "triton-kit"
BENCHMARKS = "triton_kit.benchmarks"


@dataclass(frozen=True)
class Command:
    """A subcommand: the module it runs, the arguments put before the user's, and the pip
    extra (pyproject.toml) whose packages that module needs."""

    module: str
    head: tuple[str, ...]
    extra: str
    help: str

    def python_m(self) -> str:
        """The command it stands for (a benchmark's module is chosen by its first argument)."""
        module = f"{BENCHMARKS}.SUBJECT" if self.module == BENCHMARKS else self.module
        return " ".join(("python -m", module, *self.head))


COMMANDS = {
    "build": Command(
        "triton_kit.build_engines", (), "build", "export, lower and write model_repository/"
    ),
    "serve": Command(
        "triton_kit.server", ("serve",), "serve", "run the embedded Triton in the foreground"
    ),
    "loadtest": Command(
        "triton_kit.loadtest", ("run",), "loadtest", "stepped Locust load with reports and SLOs"
    ),
    "tune": Command(
        "triton_kit.loadtest",
        ("tune",),
        "loadtest",
        "best Triton config per model under a p99 SLO (Model Analyzer)",
    ),
    "bench": Command(BENCHMARKS, (), "bench", "run a benchmark: triton-kit bench SUBJECT ..."),
}


def build_parser() -> argparse.ArgumentParser:
    """For help and errors only: dispatch reads argv itself, so that every argument after
    the subcommand, ``--help`` included, reaches the entry point's own parser untouched."""
    lines = [
        f"  {name:<9} {command.help}\n"
        f"  {'':<9} = {command.python_m()} ...; needs pip install '{DISTRIBUTION}[{command.extra}]'"
        for name, command in COMMANDS.items()
    ]
    parser = argparse.ArgumentParser(
        prog="triton-kit",
        description="Build, serve, load-test and benchmark the kit's models on Triton. Each "
        "subcommand runs one of the kit's `python -m` entry points with the arguments given.",
        epilog="subcommands:\n" + "\n".join(lines) + "\n\n`triton-kit SUB --help` shows that "
        "subcommand's options. `pip install triton-kit` alone installs the client SDK "
        "(triton_kit.client); the extras add the rest, and [dev] has them all.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=list(COMMANDS), metavar="SUB", help="; ".join(COMMANDS))
    return parser


def bench_subjects() -> list[str]:
    """The benchmarks ``python -m triton_kit.benchmarks.NAME`` runs: packages with a
    ``__main__``, found on disk without importing them."""
    spec = importlib.util.find_spec(BENCHMARKS)
    folders = spec.submodule_search_locations if spec else None
    return sorted(
        path.parent.name for folder in folders or () for path in Path(folder).glob("*/__main__.py")
    )


def bench_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triton-kit bench",
        description="Run a benchmark: `triton-kit bench SUBJECT ARGS` is `python -m "
        f"{BENCHMARKS}.SUBJECT ARGS` (a module too, e.g. nmt.rnn). `triton-kit bench SUBJECT "
        "--help` shows its options.",
    )
    parser.add_argument(
        "subject", choices=bench_subjects(), metavar="SUBJECT", help=", ".join(bench_subjects())
    )
    return parser


def bench_module(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The benchmark module and its arguments; help or a usage error (SystemExit) where the
    subject is missing or unknown."""
    if not argv or argv[0].startswith("-"):
        bench_parser().parse_args(argv[:1])  # help, or a usage error naming the subjects
    subject = argv[0]
    module = f"{BENCHMARKS}.{subject}"
    if subject.split(".")[0] not in bench_subjects() or not _module_exists(module):
        bench_parser().error(f"no benchmark {subject!r}; choose from {', '.join(bench_subjects())}")
    return module, list(argv[1:])


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return match.group(1) if match else requirement


def extra_of(requirement: str) -> str | None:
    """The extra a requirement line of the installed metadata belongs to (None: always)."""
    match = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
    return match.group(1) if match else None


def missing_distributions(
    extra: str, requires: Iterable[str], installed: Callable[[str], bool]
) -> list[str]:
    """Distributions an extra needs that are not installed, following the extras it
    includes (``triton-kit[serve]`` inside ``build``), sorted."""
    requires = list(requires)
    wanted, seen, queue = [], {extra}, [extra]
    while queue:
        current = queue.pop(0)
        for line in requires:
            if extra_of(line) != current:
                continue
            name = requirement_name(line)
            if name == DISTRIBUTION:
                inner = re.search(r"\[([^\]]*)\]", line.split(";")[0])
                for included in inner.group(1).split(",") if inner else ():
                    if included.strip() not in seen:
                        seen.add(included.strip())
                        queue.append(included.strip())
            elif name not in wanted:
                wanted.append(name)
    return sorted(name for name in wanted if not installed(name))


def is_installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def missing_for(extra: str) -> list[str]:
    """What the installed kit's ``extra`` lacks here; nothing when the kit is not installed
    as a distribution (a bare checkout on PYTHONPATH: then imports speak for themselves)."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return missing_distributions(extra, requires, is_installed)


def missing_extra_message(name: str, extra: str, missing: Sequence[str]) -> str:
    return (
        f"triton-kit {name}: needs the '{extra}' extra, which is not installed here "
        f"(missing: {', '.join(missing)}).\n"
        f"Install it with: pip install '{DISTRIBUTION}[{extra}]' "
        f"(from a checkout: pip install -e '.[{extra}]')"
    )


def renamed(prog: str | None, entry_point: str, typed: str) -> str | None:
    """``prog`` with the entry point's own name (``python -m triton_kit.server serve``, as
    its parser and the subparsers under it spell it) put as the user typed it
    (``triton-kit serve``); any other name unchanged."""
    if prog is not None and (prog == entry_point or prog.startswith(entry_point + " ")):
        return typed + prog[len(entry_point) :]
    return prog


@contextmanager
def programs_named(entry_point: str, typed: str) -> Iterator[None]:
    """While it lasts, an ``argparse`` parser named ``entry_point`` (or a subparser of it)
    calls itself ``typed`` in its usage, help and errors. Every entry point sets its own
    ``prog`` (``python -m ...``, right when run that way); this renames it for the delegated
    run alone, without a flag threaded through each entry point's parser."""
    original = argparse.ArgumentParser.__init__

    def init(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        if args:
            args = (renamed(args[0], entry_point, typed), *args[1:])
        elif "prog" in kwargs:
            kwargs["prog"] = renamed(kwargs["prog"], entry_point, typed)
        original(self, *args, **kwargs)

    argparse.ArgumentParser.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.__init__ = original  # type: ignore[method-assign]


def run_module(module: str, argv: Sequence[str]) -> int:
    """Run ``python -m module argv`` in this process; its exit status comes back."""
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = done.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv[:1])  # help, or a usage error naming the choices
        return 2
    name, rest = argv[0], argv[1:]
    command = COMMANDS[name]
    missing = missing_for(command.extra)
    if missing:
        print(missing_extra_message(name, command.extra, missing), file=sys.stderr)
        return 2
    if name == "bench":
        module, rest = bench_module(rest)
        subject = module.removeprefix(f"{BENCHMARKS}.")
        with programs_named(f"python -m {module}", f"triton-kit bench {subject}"):
            return run_module(module, rest)
    with programs_named(command.python_m(), f"triton-kit {name}"):
        return run_module(command.module, [*command.head, *rest])


if __name__ == "__main__":
    sys.exit(main())
