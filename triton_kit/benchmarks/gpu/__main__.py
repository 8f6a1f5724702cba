"""`python -m triton_kit.benchmarks.gpu`: runs benchmarks.gpu.run."""

from triton_kit.benchmarks.gpu.run import main

raise SystemExit(main())
