"""`python -m benchmarks.nmt`: runs benchmarks.nmt.run."""

from benchmarks.nmt.run import main

raise SystemExit(main())
