"""`python -m triton_kit.server serve --help` documents every option with its default (issue 13)."""

from __future__ import annotations

import pytest

from triton_kit.server.__main__ import build_parser

pytestmark = pytest.mark.reliability


def test_every_serve_option_has_help_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PORT", "18000")
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]
    text = serve.format_help()
    for action in serve._actions:
        if action.dest == "help":
            continue
        assert action.help, f"--{action.dest} has no help"
    assert "$HTTP_PORT" in text and "(default: 18000)" in text
    assert "triton-kit-api-key" in text
