"""`python -m benchmarks.precision`: runs benchmarks.precision.run."""

from benchmarks.precision.run import main

raise SystemExit(main())
