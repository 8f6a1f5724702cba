"""Unit tests run without a server and in seconds: starting a tritonserver from here fails the
test; model builds and benchmark runs belong in tests/build/."""

from __future__ import annotations

from tests.support.no_server import no_triton  # noqa: F401  (autouse)
