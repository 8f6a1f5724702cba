"""`python -m triton_kit.benchmarks.precision`: runs benchmarks.precision.run."""

from triton_kit.benchmarks.precision.run import main

raise SystemExit(main())
