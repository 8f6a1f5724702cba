"""What ``build_engines nmt`` builds with ``--engine``, ``--search`` and ``--ct2-text`` left out,
per architecture, and why: the ONE place these defaults are written.

Imports nothing of the nmt family, so the flags (``--help``), the options and the
architectures (:mod:`~triton_kit.build_engines.families.nmt.transformer`,
:mod:`~triton_kit.build_engines.families.nmt.rnn.architecture`, each pointing here as
``default``) all read it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The engines whose build is the whole search and nothing else: --search left out means engine.
WHOLE_SEARCH_ENGINES = ("ctranslate2",)
STEP_SEARCH = "python"  # --search left out with another engine named: what it built before


@dataclass(frozen=True)
class ArchitectureDefault:
    """What ``build_engines nmt --architecture NAME`` builds when ``--engine``, ``--search`` and
    ``--precision`` are left out, and why (``--help`` prints it). ``--precision`` left out is
    the engine's own default (:func:`triton_kit.build_engines.flags.default_precision`)."""

    engine: str  # an --engine value
    search: str  # a --search value, with that engine
    why: str
    # --ct2-text/--no-ct2-text left out with --engine ctranslate2 (named or the default): whether
    # ``nmt`` is the ctranslate2 backend's text model (True) or a python ``nmt`` in front of
    # ``nmt_ct2`` (False). Needs the backend built with libsentencepiece-dev.
    ct2_text: bool = False

    def search_for(self, engine: str) -> str:
        """``--search`` left out: this default's search with its engine, ``engine`` for an
        engine that is the whole search (CTranslate2), else the Python search over step
        models (what ``--engine onnxruntime``/``torch``/``tensorrt`` built before)."""
        if engine == self.engine:
            return self.search
        return "engine" if engine in WHOLE_SEARCH_ENGINES else STEP_SEARCH

    def ct2_text_for(self, engine: str) -> bool:
        """``--ct2-text``/``--no-ct2-text`` left out: this default's text mode with
        ``--engine ctranslate2`` (whether named or this default's engine), never with another
        engine (the text mode is the ctranslate2 backend's)."""
        return self.ct2_text and engine in WHOLE_SEARCH_ENGINES


# The ONE place each architecture's default build is written (the Architecture classes point
# here as ``default``; the flags and --help read it without importing model code).
DEFAULTS = {
    "transformer": ArchitectureDefault(
        engine="ctranslate2",
        search="engine",
        why="CTranslate2 int8, the whole translation in the kit's ctranslate2 backend: served "
        "1.44-2.71x the Python search over ONNX Runtime step models on the 2-core CPU at beams "
        "1 and 4, 8 and 32 clients (python -m triton_kit.benchmarks.nmt --ct2-sizes tiny, "
        "benchmarks/results/nmt_ctranslate2.md); nmt itself is that backend in text mode "
        "(--ct2-text: sentencepiece inside the backend, no python model on the path): 0.97-1.64x "
        "the python nmt in front of nmt_ct2 through the kit's SDK, median 1.35x, as fast as "
        "clients calling nmt_ct2 directly, 3 runs on the shared 2-core CPU (python -m "
        "triton_kit.benchmarks.nmt --sizes tiny --concurrency 8,32 --beams 1,4 --int8-sizes '' "
        "--torch-int8-sizes '' --torch-generate-sizes '' --graph-sizes '' --ct2-sizes tiny "
        "--ct2-text-sizes tiny --repeats 3, benchmarks/results/nmt_ct2_text.md); "
        "--no-ct2-text builds the python nmt in front of nmt_ct2",
        ct2_text=True,
    ),
    "rnn": ArchitectureDefault(
        engine="torch",
        search="engine",
        why="the whole search in one TorchScript model (nmt_rnn_generate, served by Triton's "
        "pytorch backend; CTranslate2 has no recurrent model) behind a tokenising nmt_rnn whose "
        "stub imports no engine library, so every default python stub runs without onnxruntime "
        "and torch (issue 31). Not faster everywhere: served, it ran 0.80x (beam 1, 8 clients), "
        "1.34x (beam 1, 32), 0.88x (beam 4, 8) and 1.20x (beam 4, 32) the Python search over "
        "ONNX Runtime step models on the 2-core CPU, slower with 8 clients and faster with 32, "
        "exact match 1.000 (one run, benchmarks/results/nmt_rnn_engine_search.md); --engine "
        "onnxruntime --search python still builds that search",
    ),
}


def default_of(name: str) -> ArchitectureDefault:
    """The default build of architecture ``name`` (one of :data:`ARCHITECTURES`)."""
    try:
        return DEFAULTS[name]
    except KeyError:
        raise ValueError(
            f"unknown NMT architecture {name!r}: one of {', '.join(DEFAULTS)}"
        ) from None
