"""Each build the NMT benchmark measures is accepted by the build with the flags
``large.build_repository`` puts before it (the Python search's, which later flags override):
``--ct2-text`` once lacked ``--search engine`` and every ``--ct2-text-sizes`` run was refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_kit.benchmarks.nmt.architectures import VARIANTS
from triton_kit.benchmarks.nmt.large import PYTHON_SEARCH_ARGS
from triton_kit.build_engines.cli import build_from_argv


@pytest.mark.parametrize("key", ["ct2", "ct2-text"])
def test_variant_flags_after_the_python_search_are_accepted(key: str, tmp_path: Path) -> None:
    variant = VARIANTS[key]
    argv = ["nmt", "--precision", variant.precision, *PYTHON_SEARCH_ARGS, *variant.build_args]
    argv += ["--dry-run", "--output-repository", str(tmp_path / "repo")]
    build_from_argv(argv)  # raises BuildError where the flags are refused
