"""Benchmarks: one subpackage per subject, each runnable as ``python -m benchmarks.<subject>``.

Their reports (Markdown) are written to :data:`RESULTS`, apart from the code, with the raw
runs a report cites beside it.
"""

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
