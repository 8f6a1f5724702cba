"""``--queue-policy``, ``--max-queue-size``, ``--queue-timeout-ms``: parsed once (issue 12 item 6).

Expected values restate the issue and the flags' help: ``off`` (the default) writes no queue
policy; ``bounded`` is a queue of 128 with a 5 s rejecting timeout that a client's deadline
may shorten; the two numbers override it and need ``--queue-policy bounded``.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from triton_kit.build_engines.cli import FAMILIES, build_parser, family_options, main
from triton_kit.build_engines.options import BuildOptions, rebuild_command
from triton_kit.python_models.common.serving_policy import QueuePolicy


def _queue(*flags: str, family: str = "resnet50") -> QueuePolicy:
    return family_options(family, build_parser().parse_args([family, *flags])).queue


def test_the_default_writes_no_policy() -> None:
    assert _queue() == QueuePolicy(0, 0, False) == BuildOptions().queue
    assert _queue("--queue-policy", "off").off


@pytest.mark.parametrize("family", [*FAMILIES, "all"])
def test_bounded_is_128_requests_and_a_5_s_rejecting_timeout(family: str) -> None:
    assert _queue("--queue-policy", "bounded", family=family) == QueuePolicy(128, 5_000_000, True)


def test_size_and_timeout_override_the_bounded_values() -> None:
    both = ("--max-queue-size", "7", "--queue-timeout-ms", "250")
    assert _queue("--queue-policy", "bounded", *both) == QueuePolicy(7, 250_000, True)
    size = _queue("--queue-policy", "bounded", "--max-queue-size", "7")
    assert size == QueuePolicy(7, 5_000_000, True)
    timeout = _queue("--queue-policy", "bounded", "--queue-timeout-ms", "250")
    assert timeout == QueuePolicy(128, 250_000, True)


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-queue-size", "7"],
        ["--queue-timeout-ms", "250"],
        ["--queue-policy", "off", "--max-queue-size", "7", "--queue-timeout-ms", "250"],
    ],
)
def test_a_size_or_timeout_without_the_bounded_policy_is_refused(flags, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["resnet50", "--dry-run", *flags])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--max-queue-size and --queue-timeout-ms need --queue-policy bounded" in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-queue-size", "-1"), ("--queue-timeout-ms", "-5"), ("--max-queue-size", "x")],
)
def test_negative_or_non_integer_values_are_refused(flag: str, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bert", "--dry-run", "--queue-policy", "bounded", flag, value])
    assert exited.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err


@pytest.mark.parametrize("family", [*FAMILIES, "all"])
def test_help_states_the_trade_off(family: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([family, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--queue-policy {off,bounded}", "--max-queue-size N", "--queue-timeout-ms MS"):
        assert flag in text
    assert "rejects excess requests at once" in text
    assert "Triton 2.51" in text and "500 ms" in text and "prefetch" in text


def test_the_top_level_help_points_at_the_flag(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--queue-policy bounded" in text and "500 ms" in text


def test_the_rebuild_command_carries_the_queue_and_parses_back() -> None:
    options = replace(BuildOptions(family="bert"), queue=QueuePolicy(7, 250_000, True))
    command = rebuild_command(options, "bert_model")
    assert "--queue-policy bounded --max-queue-size 7 --queue-timeout-ms 250" in command
    assert "queue" not in rebuild_command(BuildOptions(family="bert"), "bert_model")
    argv = shlex.split(command)[3:]  # after "python -m triton_kit.build_engines"
    assert family_options("bert", build_parser().parse_args(argv)).queue == options.queue
