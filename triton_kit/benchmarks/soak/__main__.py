"""`python -m triton_kit.benchmarks.soak`: runs benchmarks.soak.run."""

from triton_kit.benchmarks.soak.run import main

raise SystemExit(main())
