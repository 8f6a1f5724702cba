"""``python -m triton_kit.loadtest tune``: each model's best Triton config under a latency SLO,
found by Triton Model Analyzer against the kit's embedded server, reported and optionally
applied.

One job per module: options (argv), space (search ranges from a model's config), inputs
(perf_analyzer input data from the kit's corpora), environment (Model Analyzer's venv),
config (its YAML), run (the subprocess), summary (its CSV to a typed result), report
(summary.md, index.html, plots), apply (diff and write the chosen fields), cli (the order).
"""
