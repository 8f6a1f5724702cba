"""Benchmarks: one subpackage per subject, each runnable as
``python -m triton_kit.benchmarks.<subject>``.

Their reports (Markdown) are written to :data:`RESULTS`, apart from the code, with the raw
runs a report cites beside it.
"""

from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
