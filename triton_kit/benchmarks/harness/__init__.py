"""What every benchmark shares: timed loops, percentiles, the machine, Markdown tables and
the report header (``measure``), Triton's perf_analyzer as one more engine (``perf_analyzer``),
and the served no-op model that measures the serving path alone (``floor_model``)."""
