"""`python -m triton_kit.benchmarks.nmt`: runs benchmarks.nmt.run."""

from triton_kit.benchmarks.nmt.run import main

raise SystemExit(main())
