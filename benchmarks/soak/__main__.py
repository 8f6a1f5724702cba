"""`python -m benchmarks.soak`: runs benchmarks.soak.run."""

from benchmarks.soak.run import main

raise SystemExit(main())
