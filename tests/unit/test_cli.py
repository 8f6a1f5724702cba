"""``triton-kit``: one console command whose subcommands run the kit's ``python -m`` entry points.

Run in subprocesses, as a user runs them: the console command must not import a heavy
subpackage before it knows which one is wanted, and its help must match the module's own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import tomllib

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit import cli

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())


def run(*args: str, module: str = "triton_kit.cli") -> subprocess.CompletedProcess[str]:
    """``python -m module args``; the server's is named by its ``__main__`` (the same code),
    which the server-free guard lets through since only ``--help`` or a refused option runs."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
    )


def folded(text: str) -> str:
    return " ".join(text.split())


def assert_same_but_named(ours: str, theirs: str, our_name: str, their_name: str) -> None:
    """The same text but for the program's name (argparse re-wraps a usage line whose name
    is longer or shorter, hence white space folded)."""
    assert their_name in theirs, theirs
    assert their_name not in ours, ours
    assert our_name in ours, ours
    assert folded(ours) == folded(theirs.replace(their_name, our_name))


def test_console_script_is_declared() -> None:
    assert PYPROJECT["project"]["scripts"]["triton-kit"] == "triton_kit.cli:main"


def test_every_command_names_a_real_extra() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {command.extra for command in cli.COMMANDS.values()} <= set(extras)


def test_top_level_help_lists_every_subcommand_and_its_extra() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    for name, command in cli.COMMANDS.items():
        assert name in done.stdout and f"triton-kit[{command.extra}]" in done.stdout


def test_no_arguments_prints_the_usage_and_fails() -> None:
    done = run()
    assert done.returncode == 2 and "usage: triton-kit" in done.stderr


def test_unknown_subcommand_is_refused_with_the_choices() -> None:
    done = run("frobnicate")
    assert done.returncode == 2
    assert "frobnicate" in done.stderr and "serve" in done.stderr


@pytest.mark.parametrize(
    ("args", "module_args", "names"),
    [
        (
            ["serve", "--help"],
            ["triton_kit.server.__main__", "serve", "--help"],
            ("triton-kit serve", "python -m triton_kit.server serve"),
        ),
        (
            ["build", "--help"],
            ["triton_kit.build_engines", "--help"],
            ("triton-kit build", "python -m triton_kit.build_engines"),
        ),
        (
            ["build", "nmt", "--help"],
            ["triton_kit.build_engines", "nmt", "--help"],
            ("triton-kit build nmt", "python -m triton_kit.build_engines nmt"),
        ),
        (
            ["loadtest", "--help"],
            ["triton_kit.loadtest", "run", "--help"],
            ("triton-kit loadtest", "python -m triton_kit.loadtest run"),
        ),
        (
            ["tune", "--help"],
            ["triton_kit.loadtest", "tune", "--help"],
            ("triton-kit tune", "python -m triton_kit.loadtest tune"),
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_subcommand_help_is_the_entry_points_own(
    args: list[str], module_args: list[str], names: tuple[str, str]
) -> None:
    """Delegation, not a copy: the same parser answers (options are defined once), under
    the name the user typed; ``python -m`` keeps its own."""
    ours, theirs = run(*args), run(*module_args[1:], module=module_args[0])
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    our_name, their_name = names
    assert ours.stdout.startswith(f"usage: {our_name} ")
    assert theirs.stdout.startswith(f"usage: {their_name} ")
    assert_same_but_named(ours.stdout, theirs.stdout, our_name, their_name)


def test_bench_lists_the_benchmarks_that_python_m_runs() -> None:
    done = run("bench", "--help")
    assert done.returncode == 0, done.stderr
    for subject in ("resnet50", "bert", "nmt", "precision", "loadgen", "soak", "gpu"):
        assert subject in done.stdout
    assert set(cli.bench_subjects()) >= {"resnet50", "bert", "nmt", "precision", "loadgen"}


def test_bench_subject_help_is_the_benchmarks_own() -> None:
    ours = run("bench", "loadgen", "--help")
    theirs = run("--help", module="triton_kit.benchmarks.loadgen")
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert ours.stdout.startswith("usage: triton-kit bench loadgen ")
    assert_same_but_named(
        ours.stdout,
        theirs.stdout,
        "triton-kit bench loadgen",
        "python -m triton_kit.benchmarks.loadgen",
    )


def test_bench_refuses_an_unknown_subject() -> None:
    done = run("bench", "nosuch")
    assert done.returncode == 2 and "nosuch" in done.stderr and "resnet50" in done.stderr


@pytest.mark.parametrize(
    ("args", "module_args", "their_name"),
    [
        (
            ["serve", "--http-port", "eighty"],
            ["triton_kit.server.__main__", "serve", "--http-port", "eighty"],
            "python -m triton_kit.server serve",
        ),
        (
            ["tune", "--slo-p99-ms", "-3"],
            ["triton_kit.loadtest", "tune", "--slo-p99-ms", "-3"],
            "python -m triton_kit.loadtest tune",
        ),
        (
            ["build", "nosuchfamily"],
            ["triton_kit.build_engines", "nosuchfamily"],
            "python -m triton_kit.build_engines",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_delegated_command_keeps_its_errors_and_status(
    args: list[str], module_args: list[str], their_name: str
) -> None:
    """A refused option: the entry point's own message and exit status come back, under
    the name the user typed."""
    ours, theirs = run(*args), run(*module_args[1:], module=module_args[0])
    assert ours.returncode == theirs.returncode != 0
    assert f"triton-kit {args[0]}: error:" in ours.stderr
    assert f"{their_name}: error:" in theirs.stderr
    assert_same_but_named(ours.stderr, theirs.stderr, f"triton-kit {args[0]}", their_name)


def test_python_m_keeps_its_own_name_after_the_console_ran_in_the_same_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The renaming lasts for the delegated run only: a parser made afterwards, in the same
    interpreter, is named as its entry point names it."""
    assert cli.main(["build", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: triton-kit build ")
    from triton_kit.build_engines.cli import build_parser

    assert build_parser().format_usage().startswith("usage: python -m triton_kit.build_engines ")


def test_the_console_module_imports_no_heavy_package() -> None:
    probe = (
        "import sys, triton_kit.cli as c; "
        "heavy = [m for m in ('torch', 'onnx', 'onnxruntime', 'locust', 'matplotlib', "
        "'triton_kit.server', 'triton_kit.build_engines', 'triton_kit.loadtest') "
        "if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_missing_distributions_follow_the_extras_it_includes() -> None:
    requires = [
        'torch==2.13.0; extra == "serve"',
        'nvidia-pytriton<0.8,>=0.7; extra == "serve"',
        'triton-kit[serve]; extra == "build"',
        'onnx<2,>=1.17; extra == "build"',
        "numpy>=1.26",
        'locust; extra == "loadtest"',
    ]
    present = {"torch", "numpy"}
    missing = cli.missing_distributions("build", requires, present.__contains__)
    assert missing == ["nvidia-pytriton", "onnx"]
    assert cli.missing_distributions("serve", requires, lambda _: True) == []


def test_this_environment_has_every_extra() -> None:
    """make setup installs dev, which includes all the others."""
    for command in cli.COMMANDS.values():
        assert cli.missing_for(command.extra) == [], command.extra


def test_missing_extra_message_names_the_pip_command() -> None:
    message = cli.missing_extra_message("serve", "serve", ["torch", "nvidia-pytriton"])
    assert "pip install 'triton-kit[serve]'" in message
    assert "torch" in message and "nvidia-pytriton" in message
