"""What a stepped run leaves behind: per-step summaries (``summary``, ``stability``, ``slo``),
the JSON/CSV/Markdown files and plots (``files``), ``index.html`` (``html``), and Locust's
sub-millisecond percentiles (``resolution``)."""
