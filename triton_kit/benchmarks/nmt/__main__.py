"""`python -m triton_kit.benchmarks.nmt [--architecture transformer|rnn]`: runs benchmarks.nmt.run
for either architecture."""

from triton_kit.benchmarks.nmt.run import main

raise SystemExit(main())
