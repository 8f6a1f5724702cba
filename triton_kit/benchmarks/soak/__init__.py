"""Mixed traffic at a fraction of the measured maximum for minutes: errors, p99 drift, RSS
(``run``); SIGTERM with load in flight (``drain``,
``python -m triton_kit.benchmarks.soak.drain``). Both are reported in results/reliability.md."""
