"""`python -m triton_kit.benchmarks.bert`: runs benchmarks.bert.run."""

from triton_kit.benchmarks.bert.run import main

raise SystemExit(main())
