"""`python -m triton_kit.benchmarks.gpu.pipelines`: runs benchmarks.gpu.pipelines.run."""

from triton_kit.benchmarks.gpu.pipelines.run import main

raise SystemExit(main())
