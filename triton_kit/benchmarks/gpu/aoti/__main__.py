"""`python -m triton_kit.benchmarks.gpu.aoti`: runs benchmarks.gpu.aoti.run."""

from triton_kit.benchmarks.gpu.aoti.run import main

raise SystemExit(main())
