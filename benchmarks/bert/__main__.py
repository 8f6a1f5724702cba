"""`python -m benchmarks.bert`: runs benchmarks.bert.run."""

from benchmarks.bert.run import main

raise SystemExit(main())
