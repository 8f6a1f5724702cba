"""The guard of the server-free folders (tests/unit, tests/build): a test there that starts a
tritonserver fails. Their conftests import ``no_triton``, an autouse fixture."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _starts_triton(args: object) -> bool:
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)  # type: ignore[call-overload]
    words = [os.fsdecode(a) for a in argv]
    return bool(words) and (
        Path(words[0].split()[0]).name == "tritonserver"
        or words[1:4] == ["-m", "triton_kit.server", "serve"]
    )


@pytest.fixture(autouse=True)
def no_triton(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that needs Triton belongs in tests/integration/ (marker ``server``)."""
    popen_init = subprocess.Popen.__init__  # read now: gevent may have patched Popen

    def refuse(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
        if _starts_triton(args):
            raise AssertionError(
                f"a server-free test started a server ({args!r}): move it to integration"
            )
        popen_init(self, args, *rest, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield
