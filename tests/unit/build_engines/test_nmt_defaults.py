"""What ``build_engines nmt`` builds with ``--engine``/``--search``/``--precision``/``--ct2-text``
left out (issue 31): CTranslate2 int8 in the backend's text mode for the Transformer (``nmt``
itself the C++ backend; ``--no-ct2-text`` the python ``nmt`` in front of ``nmt_ct2``), the
TorchScript search for the RNN, each written once (families/nmt/defaults.py). An explicit
engine and search still build what they built before; ``--search`` left out with the
architecture's default engine is its default search, so ``--architecture rnn --engine torch``
(refused before: the recurrent model has no TorchScript step models, and ``--search python``
with it still is, tests/build/build_engines/test_nmt_rnn_torch_generate.py) is now the
TorchScript search, and ``--architecture rnn --engine onnxruntime`` is still the Python search
over ONNX Runtime step models."""

from __future__ import annotations

import pytest

from triton_kit.build_engines.cli import build_parser, family_engine, family_options, main
from triton_kit.build_engines.engines.registry import Engine
from triton_kit.build_engines.families import nmt
from triton_kit.build_engines.families.nmt.defaults import DEFAULTS
from triton_kit.build_engines.families.nmt.options import ARCHITECTURES, architecture
from triton_kit.build_engines.families.nmt.pipeline import ct2_text, engine_search
from triton_kit.build_engines.flags import parse_build_args
from triton_kit.build_engines.steps import BuildError

PY, EN = "python", "engine"  # --search values


def _resolved(*argv: str) -> tuple[str, str, str | None]:
    """(engine, precision, search) of ``python -m triton_kit.build_engines ARGV``."""
    args = parse_build_args(build_parser(), list(argv), family_engine)
    options = family_options(args.family, args)
    if args.family != "nmt":
        return options.engine.value, options.precision, None
    search = nmt.options_from(args).search_for(options.engine.value)
    return options.engine.value, options.precision, search


def _text_mode(*argv: str) -> bool:
    """Whether ``python -m triton_kit.build_engines ARGV`` writes ``nmt`` as the ctranslate2
    backend's text model (pipeline.ct2_text, which refuses before any work)."""
    args = parse_build_args(build_parser(), list(argv), family_engine)
    return ct2_text(family_options("nmt", args), nmt.options_from(args))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nmt"], ("ctranslate2", "int8", "engine")),
        (["nmt", "--precision", "fp32"], ("ctranslate2", "fp32", "engine")),
        (["nmt", "--architecture", "rnn"], ("torch", "fp32", "engine")),
        (["nmt", "--architecture", "rnn", "--engine", "onnxruntime"], ("onnxruntime", "fp32", PY)),
        (
            ["nmt", "--architecture", "rnn", "--engine", "onnxruntime", "--search", "python"],
            ("onnxruntime", "fp32", PY),
        ),
        (["nmt", "--architecture", "rnn", "--engine", "torch"], ("torch", "fp32", EN)),
        # Explicit engines build what they built before the default moved.
        (["nmt", "--engine", "onnxruntime"], ("onnxruntime", "fp32", "python")),
        (["nmt", "--engine", "onnxruntime", "--search", "python"], ("onnxruntime", "fp32", PY)),
        (["nmt", "--engine", "onnxruntime", "--search", "engine"], ("onnxruntime", "fp32", EN)),
        (["nmt", "--engine", "torch"], ("torch", "fp32", "python")),
        (["nmt", "--engine", "torch", "--search", "engine"], ("torch", "fp32", "engine")),
        (["nmt", "--engine", "tensorrt"], ("tensorrt", "fp32", "python")),
        (
            ["nmt", "--engine", "onnxruntime", "--precision", "int8-dynamic"],
            ("onnxruntime", "int8-dynamic", "python"),
        ),
        (
            ["nmt", "--architecture", "rnn", "--engine", "torch", "--search", "engine"],
            ("torch", "fp32", "engine"),
        ),
        # The other families keep the build's default engine.
        (["resnet50"], ("onnxruntime", "fp32", None)),
        (["bert"], ("onnxruntime", "fp32", None)),
    ],
)
def test_left_out_flags_resolve_per_family_and_architecture(argv, expected) -> None:
    assert _resolved(*argv) == expected


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_each_architecture_points_at_its_one_default(name: str) -> None:
    assert set(DEFAULTS) == set(ARCHITECTURES)
    assert architecture(name).default is DEFAULTS[name]
    assert DEFAULTS[name].search_for(DEFAULTS[name].engine) == DEFAULTS[name].search


def test_all_gives_each_family_its_own_default_engine() -> None:
    parser = build_parser()
    engines = {}
    for family in ("resnet50", "bert", "nmt"):
        args = parse_build_args(parser, [family, "--dry-run"], family_engine)
        engines[family] = family_options(family, args).engine
    assert engines == {
        "resnet50": Engine.ONNXRUNTIME,
        "bert": Engine.ONNXRUNTIME,
        "nmt": Engine.CTRANSLATE2,
    }
    assert family_engine(parser.parse_args(["all"])) is None  # resolved per family


def test_a_precision_the_default_engine_cannot_build_is_a_usage_error_naming_it(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["nmt", "--precision", "int8-dynamic", "--dry-run"])
    assert caught.value.code == 2
    assert "--engine left out: nmt builds with --engine ctranslate2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["nmt", "--precision", "fp16"], "not fp16; it is nmt's default engine"),
        (["nmt", "--engine", "ctranslate2", "--search", "python"], "no step models"),
        (["nmt", "--architecture", "rnn", "--engine", "ctranslate2"], "no converter"),
    ],
)
def test_ctranslate2_refusals_come_before_any_work(argv, words) -> None:
    """engine_search runs first in the pipeline: no export, no conversion, then a refusal."""
    args = parse_build_args(build_parser(), argv, family_engine)
    options, model_options = family_options("nmt", args), nmt.options_from(args)
    search = model_options.search_for(options.engine.value)
    with pytest.raises(BuildError, match=words):
        engine_search(architecture(model_options.architecture), options, search)


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["nmt"], True),  # the default: nmt is the ctranslate2 backend's text model
        (["nmt", "--precision", "fp32"], True),
        (["nmt", "--engine", "ctranslate2"], True),  # named: the same default
        (["nmt", "--engine", "ctranslate2", "--search", "engine"], True),
        (["nmt", "--ct2-text"], True),
        (["nmt", "--no-ct2-text"], False),  # the python nmt in front of nmt_ct2
        (["nmt", "--engine", "ctranslate2", "--no-ct2-text"], False),
        # Other engines and the RNN: no text mode, --no-ct2-text changes nothing.
        (["nmt", "--engine", "onnxruntime"], False),
        (["nmt", "--engine", "onnxruntime", "--no-ct2-text"], False),
        (["nmt", "--engine", "torch", "--search", "engine"], False),
        (["nmt", "--architecture", "rnn"], False),
    ],
)
def test_the_transformers_ctranslate2_build_is_the_text_mode_unless_opted_out(argv, text) -> None:
    assert _text_mode(*argv) is text


def test_the_text_mode_default_is_written_once_per_architecture() -> None:
    assert DEFAULTS["transformer"].ct2_text is True
    assert DEFAULTS["rnn"].ct2_text is False
    assert nmt.NmtOptions().ct2_text is None  # left out: resolved per architecture and engine
    assert nmt.NmtOptions().ct2_text_for("ctranslate2") is True
    assert nmt.NmtOptions().ct2_text_for("onnxruntime") is False
    assert nmt.NmtOptions(architecture="rnn").ct2_text_for("ctranslate2") is False


def test_ct2_text_named_with_another_engine_is_refused_before_any_work() -> None:
    with pytest.raises(BuildError, match=r"--ct2-text .* needs --engine ctranslate2"):
        _text_mode("nmt", "--engine", "onnxruntime", "--ct2-text")


def test_help_states_each_default_and_why(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["nmt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "transformer: --engine ctranslate2 --search engine --ct2-text" in text
    assert "rnn: --engine torch --search engine" in text
    assert "benchmarks/results/nmt_ctranslate2.md" in text
    assert "benchmarks/results/nmt_ct2_text.md" in text
    assert "--ct2-text-sizes tiny" in text  # the command behind the text mode's numbers
    assert "[--ct2-text | --no-ct2-text]" in text
    assert "--no-ct2-text writes the python nmt, tokenising and calling nmt_ct2 by BLS" in text
    assert "libsentencepiece-dev" in text
    assert "CTranslate2 has no recurrent model" in text
    assert "benchmarks/results/nmt_rnn_engine_search.md" in text
    assert "0.80x (beam 1, 8 clients), 1.34x (beam 1, 32), 0.88x (beam 4, 8)" in text
    assert "1.20x (beam 4, 32)" in text
