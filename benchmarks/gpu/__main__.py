"""`python -m benchmarks.gpu`: runs benchmarks.gpu.run."""

from benchmarks.gpu.run import main

raise SystemExit(main())
