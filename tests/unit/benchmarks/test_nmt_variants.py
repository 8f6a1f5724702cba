"""Every other build the NMT benchmark measures (architectures.VARIANTS) resolves, through the
flags ``large.build_repository`` gives the build (the Python search's flags first, then the
variant's), to a build the pipeline accepts before any work: a variant whose flags the build
refuses fails the whole run after the default repository is built (``--ct2-text-sizes`` did:
``--engine ctranslate2`` under the inherited ``--search python``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_kit.benchmarks.nmt import large
from triton_kit.benchmarks.nmt.architectures import BENCHMARKED, VARIANTS
from triton_kit.build_engines.cli import build_parser, family_engine, family_options
from triton_kit.build_engines.families import nmt
from triton_kit.build_engines.families.nmt.options import architecture
from triton_kit.build_engines.families.nmt.pipeline import ct2_text, engine_search
from triton_kit.build_engines.flags import parse_build_args

CASES = [(name, key) for name, bench in BENCHMARKED.items() for key in bench.variants]


@pytest.mark.parametrize(("name", "key"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_each_variant_builds_what_it_names(name: str, key: str, tmp_path: Path) -> None:
    spec = VARIANTS[key]
    argv = large.build_argv(
        tmp_path / "checkpoint",
        tmp_path / "repository",
        tmp_path / "work",
        1,
        precision=spec.precision,
        engine_args=("--architecture", name, *spec.build_args),
    )
    args = parse_build_args(build_parser(), argv, family_engine)
    options, model_options = family_options("nmt", args), nmt.options_from(args)
    search = model_options.search_for(options.engine.value)
    generate = engine_search(architecture(name), options, search)  # raises where refused
    assert generate == (spec.search != "python")
    assert ct2_text(options, model_options) == (key == "ct2-text")
    assert options.precision == spec.precision
